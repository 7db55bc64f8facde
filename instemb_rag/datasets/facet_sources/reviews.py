"""Reviews: SemEval-2016 ABSA restaurant and laptop review sentences (aspect categories), and
SubjQA reviews of grocery, electronics, restaurants, books and movies (aspect questions).

ABSA: a subject is one review; its sentences are joined per aspect. The categories
(ENTITY#ATTRIBUTE) are folded into aspects a user would ask for ("FOOD#QUALITY" and
"FOOD#STYLE_OPTIONS" are both the food; any "#PRICES" is the prices); the catch-all categories
(RESTAURANT#GENERAL, LAPTOP#MISCELLANEOUS, ...) say nothing specific and are left out, and a
sentence filed under two kept aspects is left out of both (it would answer either instruction).

SubjQA: a subject is one product; its answered questions give the aspects. The passage is the
answer's sentence with its neighbours (the whole review covers several aspects); aspect words
that name the same thing (taste, flavor) are one aspect."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from ...jsonl import read_jsonl
from .drafts import SubjectDraft, keep_subject
from .passages import join, long_enough, sentence_around
from .wording import aspects

ABSA_ASPECTS = aspects(
    {
        "food": (("the food", "how the dishes tasted", "the quality of the cooking", "what we ate", "the menu"), ()),
        "drinks": (("the drinks", "the wine and cocktails", "what there is to drink", "the beverages"), ()),
        "service": (
            ("the service", "the staff", "how the waiters treated us", "the friendliness of the servers"),
            ("How was the service?", "Were the staff friendly?"),
        ),
        "ambience": (
            (
                "the atmosphere",
                "the decor and the vibe",
                "how the place feels inside",
                "the ambience",
                "the noise level",
            ),
            ("What is the atmosphere like?",),
        ),
        "location": (("the location", "where it is and how to get there", "the neighbourhood", "the view"), ()),
        "prices": (
            ("the prices", "value for money", "how expensive it is", "the cost"),
            ("Is it worth the money?", "How much does it cost?"),
        ),
        "battery": (
            ("battery life", "how long it runs unplugged", "charging", "the battery"),
            ("How long does the battery last?",),
        ),
        "display": (("the screen", "the display", "how the screen looks", "screen resolution and brightness"), ()),
        "keyboard": (("the keyboard", "typing on it", "the keys"), ()),
        "touchpad": (("the touchpad", "the trackpad", "the mouse"), ()),
        "os": (("the operating system", "Windows or macOS", "the OS", "the system software"), ()),
        "software": (("the bundled software", "the apps", "the preinstalled programs", "the applications"), ()),
        "support": (
            ("customer support", "the help desk and repairs", "after-sales service", "warranty and shipping"),
            ("How was customer service?",),
        ),
        "company": (("the manufacturer", "the brand", "the company behind it"), ()),
        "hardware": (("the hardware", "the specs", "components like the memory and the disk", "the internals"), ()),
        "performance": (
            ("performance", "speed", "how fast it runs", "how it handles heavy work"),
            ("Is it fast?",),
        ),
        "usability": (("ease of use", "how easy it is to use", "usability", "the user experience"), ()),
        "design": (("the design", "how it looks", "the styling", "its looks and build"), ()),
        "portability": (("how portable it is", "carrying it around", "its weight and size", "portability"), ()),
        "quality": (("build quality", "reliability", "how well it is made", "durability"), ()),
        "connectivity": (("ports and connectivity", "wifi and connections", "the ports", "its connections"), ()),
        "cooling": (("fan noise and heat", "cooling", "how hot it gets"), ()),
        "audio": (("the speakers and webcam", "sound", "audio quality", "the multimedia features"), ()),
    }
)
_ABSA_ENTITY = {
    "FOOD": "food", "DRINKS": "drinks", "SERVICE": "service", "AMBIENCE": "ambience", "LOCATION": "location",
    "BATTERY": "battery", "POWER_SUPPLY": "battery", "DISPLAY": "display", "KEYBOARD": "keyboard",
    "MOUSE": "touchpad", "OS": "os", "SOFTWARE": "software", "SUPPORT": "support", "WARRANTY": "support",
    "SHIPPING": "support", "COMPANY": "company", "CPU": "hardware", "MEMORY": "hardware", "HARD_DISC": "hardware",
    "GRAPHICS": "hardware", "MOTHERBOARD": "hardware", "HARDWARE": "hardware", "OPTICAL_DRIVES": "hardware",
    "PORTS": "connectivity", "FANS_COOLING": "cooling", "MULTIMEDIA_DEVICES": "audio",
}  # fmt: skip
_LAPTOP_ATTRIBUTE = {
    "PRICE": "prices", "OPERATION_PERFORMANCE": "performance", "USABILITY": "usability",
    "DESIGN_FEATURES": "design", "PORTABILITY": "portability", "QUALITY": "quality", "CONNECTIVITY": "connectivity",
}  # fmt: skip
ABSA_QUERIES = {
    "restaurants": ("What did this reviewer think of {s}?", "Is {s} any good?", "Review of {s}"),
    "laptops": ("What did this reviewer think of {s}?", "Is {s} worth buying?", "Review of {s}"),
}
ABSA_NAMES = {"restaurants": "the restaurant", "laptops": "this laptop"}


def absa_aspect(category: str) -> str | None:
    """The aspect a category is asked as, or None for a catch-all category."""
    entity, _, attribute = category.partition("#")
    if attribute in ("PRICES", "PRICE"):
        return "prices"
    if entity in ("LAPTOP", "RESTAURANT"):
        return _LAPTOP_ATTRIBUTE.get(attribute) if entity == "LAPTOP" else None
    return _ABSA_ENTITY.get(entity)


def read_absa(folder: Path) -> list[SubjectDraft]:
    sentences: dict[tuple[str, str], dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for _, row in read_jsonl(folder / "absa16_restaurants_laptops.jsonl"):
        aspect = absa_aspect(row["facet"])
        if aspect is not None:
            sentences[(row["domain"], row["subject"])][row["passage"].strip()].add(aspect)
    drafts = []
    for (domain, subject), by_sentence in sentences.items():
        by_aspect: dict[str, list[str]] = defaultdict(list)
        for sentence, filed_under in by_sentence.items():
            if len(filed_under) == 1:
                by_aspect[next(iter(filed_under))].append(sentence)
        passages = {aspect: join(texts) for aspect, texts in by_aspect.items()}
        passages = {aspect: text for aspect, text in passages.items() if long_enough(text)}
        if keep_subject(passages):
            drafts.append(
                SubjectDraft(
                    "absa", f"{domain}-{subject}", ABSA_NAMES.get(domain, "this place"), domain, passages,
                    ABSA_ASPECTS, ABSA_QUERIES.get(domain, ABSA_QUERIES["restaurants"]),
                )
            )  # fmt: skip
    return drafts


# SubjQA aspect words that name the same thing, folded to one key; vague words left out.
_SUBJQA_SAME = {"flavor": "taste", "flavour": "taste", "flavors": "taste", "cost": "price", "value": "price",
                "characters": "character", "story": "plot", "storyline": "plot", "acting": "act"}  # fmt: skip
_SUBJQA_VAGUE = frozenset(
    {"one", "product", "experience", "thing", "item", "quality", "place", "book", "movie", "film"}
)
SUBJQA_NAMES = {"books": "this book", "movies": "this film", "grocery": "this product",
                "electronics": "this device", "restaurants": "this restaurant"}  # fmt: skip
SUBJQA_QUERIES = ("What do reviewers say about {s}?", "Is {s} any good?", "Reviews of {s}", "Should I buy {s}?")


def _subjqa_aspect_table(words: set[str]) -> dict:
    """An aspect per word: its own names ("the taste", "taste") and, via the table, its questions."""
    return aspects({word: (f"the {word}", word, f"what people say about the {word}") for word in sorted(words)})


def read_subjqa(folder: Path) -> list[SubjectDraft]:
    by_subject: dict[tuple[str, str], dict[str, str]] = defaultdict(dict)
    questions: dict[str, set[str]] = defaultdict(set)
    for _, row in read_jsonl(folder / "subjqa_reviews.jsonl"):
        span = (row.get("answer_span") or "").strip()
        if not span or "ANSWERNOTFOUND" in span:
            continue
        word = row["aspect"].strip().lower()
        word = _SUBJQA_SAME.get(word, word)
        if word in _SUBJQA_VAGUE:
            continue
        passage = sentence_around(row["review"], span)
        if passage and long_enough(passage):
            by_subject[(row["domain"], row["subject"])].setdefault(word, passage)
            questions[word].add(row["question"].strip())
    table = _subjqa_aspect_table({word for passages in by_subject.values() for word in passages})
    # The data set's own aspect questions are natural wordings ("Is the plot gripping?").
    table = {
        word: type(aspect)(aspect.key, aspect.names, tuple(sorted(questions[word]))[:20])
        for word, aspect in table.items()
    }
    return [
        SubjectDraft(
            "subjqa",
            f"{domain}-{subject}",
            SUBJQA_NAMES.get(domain, "this product"),
            domain,
            passages,
            table,
            SUBJQA_QUERIES,
        )  # fmt: skip
        for (domain, subject), passages in by_subject.items()
        if keep_subject(passages)
    ]
