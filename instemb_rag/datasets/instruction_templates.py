"""General instruction templates for distillation texts: what a user might say about any query.

The distillation teacher reads ``instruction + " " + query``, so each query is embedded under
a varied instruction; the student learns how the teacher's geometry moves with it. Kinds:

    aspect     name one side of the subject ("Focus on {aspect}.")
    purpose    why the user asks ("I need this to make a buying decision.")
    audience   who will read the answer ("Explain it for a complete beginner.")
    stance     for or against ("Look for arguments against it."): SUPPORT_TEMPLATES / REFUTE_TEMPLATES
    format     what shape of answer ("I want step-by-step instructions.")
    exclusion  what to leave out ("Skip anything about {aspect}.")

The choice is seeded per item (``random.Random(f"{seed}:{key}")``), so an item keeps its
instruction whatever else is built or capped. None of these wordings is one the evaluation asks
with (contrast_sets ``*_EVAL_PHRASINGS``): a dev figure must measure wordings training never read.
"""

from __future__ import annotations

import random

from .contrast_sets import FACET_PHRASINGS

# Filled into {aspect}: sides that most subjects have, so a template fits a query it was not written for.
ASPECTS: tuple[str, ...] = (
    "the cost",
    "safety",
    "the history",
    "the causes",
    "the effects",
    "how it works",
    "the practical steps",
    "the risks",
    "the benefits",
    "rules and regulations",
    "the people involved",
    "dates and the timeline",
    "where it happens",
    "sizes and quantities",
    "the alternatives",
    "upkeep and maintenance",
    "the environmental impact",
    "health effects",
    "common mistakes",
    "performance",
)

SUPPORT_TEMPLATES: tuple[str, ...] = (
    "Find evidence that backs this up.",
    "I want sources that agree with this.",
    "Look for arguments in favour.",
    "Which passage confirms this?",
    "Only passages that support the statement.",
    "Retrieve what speaks for it.",
)
REFUTE_TEMPLATES: tuple[str, ...] = (
    "Find evidence that this is wrong.",
    "I want the counter-arguments.",
    "Look for arguments against it.",
    "Which passage disputes this?",
    "Find something that casts doubt on this.",
    "Only passages that contradict the statement.",
)

TEMPLATES: dict[str, tuple[str, ...]] = {
    "aspect": (
        "Focus on {aspect}.",
        "I care about {aspect}.",
        "Only {aspect}, please.",
        "What matters to me is {aspect}.",
        "Retrieve passages about {aspect}.",
        "Looking for details on {aspect}.",
        "Which passage covers {aspect}?",
        "Find the part that deals with {aspect}.",
        "Pay attention to {aspect} and nothing else.",
        "I'm interested in {aspect} specifically.",
        "Concentrate on {aspect}.",
        "My question is really about {aspect}.",
    ),
    "purpose": (
        "I'm writing a school report; find background information.",
        "I need this to make a buying decision.",
        "I'm planning a trip and need practical details.",
        "Help me settle an argument with a friend.",
        "I want to sort this out myself at home.",
        "Preparing for an exam: find the key facts.",
        "I'm deciding whether this is worth my money.",
        "For a presentation at work, find something I can quote.",
        "I'm trying to understand why this happens.",
        "I need to explain this to my manager tomorrow.",
        "Gathering sources for a research paper.",
        "I want to check whether this is true before sharing it.",
    ),
    "audience": (
        "Explain it for a complete beginner.",
        "Written for a ten-year-old, please.",
        "I'm an expert; skip the basics.",
        "Find something a busy parent could read in a minute.",
        "Aimed at professionals in the field.",
        "Plain language, for someone still learning English.",
        "Suitable for a high-school class.",
        "I'm a first-timer with no background at all.",
        "For a specialist: technical terms are fine.",
        "Something my elderly parents would understand.",
        "Meant for a hobbyist who knows the basics.",
    ),
    "stance": SUPPORT_TEMPLATES
    + REFUTE_TEMPLATES
    + ("Give me both sides of this.", "I want a neutral, balanced account."),
    "format": (
        "A short definition is enough.",
        "I want step-by-step instructions.",
        "Give me numbers and figures.",
        "A list of options would be ideal.",
        "One or two sentences, not an essay.",
        "I prefer a detailed explanation.",
        "Find a passage with a concrete example.",
        "A comparison would help most.",
        "Give me a direct answer first.",
        "Looking for a summary of the main points.",
        "Find a personal story or anecdote about it.",
        "Just the facts, no opinions.",
    ),
    "exclusion": (
        "Skip anything about {aspect}.",
        "Nothing about {aspect}, please.",
        "Ignore {aspect}.",
        "I don't care about {aspect}.",
        "Leave out {aspect}; I know that already.",
        "Not interested in {aspect}.",
        "Avoid passages that only talk about {aspect}.",
        "Exclude anything on {aspect}.",
        "Anything except {aspect}.",
        "Without going into {aspect}, what is there?",
    ),
}
KINDS: tuple[str, ...] = tuple(TEMPLATES)
# A claim's plain query has a labelled positive whatever its stance: a stance wording would contradict it.
KINDS_WITHOUT_STANCE: tuple[str, ...] = tuple(kind for kind in KINDS if kind != "stance")
NONE_SHARE = 0.2  # queries left without an instruction: plain search must stay trained

# MedQuAD question types, named the way an instruction names them; none repeats the body of an
# evaluation wording ("Tell me who tends to get it."), so those stay unread.
FACET_WORDS: dict[str, tuple[str, ...]] = {
    "information": ("what it is", "a general overview", "the basic description"),
    "symptoms": ("its symptoms", "the signs to watch for", "how it shows up"),
    "treatment": ("how it is treated", "the treatment options", "the available therapies"),
    "causes": ("what causes it", "its causes", "why it develops"),
    "inheritance": ("how it is inherited", "the inheritance pattern", "whether it runs in families"),
    "frequency": ("how common it is", "how many people are affected", "its prevalence"),
    "genetic changes": ("the genetic changes involved", "the genes behind it", "the mutations that cause it"),
    "exams and tests": ("how it is diagnosed", "the tests that detect it", "the diagnostic exams"),
    "research": ("current research", "the clinical trials", "what scientists are studying"),
    "outlook": ("the outlook", "the prognosis", "what to expect long term"),
    "susceptibility": ("who is at risk", "the risk factors", "who is most likely to get it"),
    "considerations": ("the precautions", "what to keep an eye on", "special considerations"),
    "prevention": ("how to prevent it", "prevention", "ways to lower the risk"),
    "stages": ("its stages", "how it is staged", "how it progresses"),
    "complications": ("the complications", "what problems it can cause", "possible complications"),
}
FACET_FRAMES: tuple[str, ...] = (
    "Focus on {facet}.",
    "I only want {facet}.",
    "What I need is {facet}.",
    "Find the passage on {facet}.",
    "{facet}, nothing else.",
    "My question is about {facet}.",
    "I'm interested in {facet}.",
    "Only {facet}, please skip the rest.",
)


def _capitalised(text: str) -> str:
    return text[:1].upper() + text[1:]


def _fill(template: str, chooser: random.Random) -> str:
    if "{aspect}" not in template:
        return template
    return _capitalised(template.format(aspect=chooser.choice(ASPECTS)))


def _chooser(key: str, seed: int) -> random.Random:
    return random.Random(f"{seed}:{key}")


def generic_instruction(
    key: str, seed: int, kinds: tuple[str, ...] = KINDS, none_share: float = NONE_SHARE
) -> str | None:
    """A template of a random kind (or None, ``none_share`` of the time), fixed by seed and key."""
    chooser = _chooser(key, seed)
    if chooser.random() < none_share:
        return None
    return _fill(chooser.choice(TEMPLATES[chooser.choice(kinds)]), chooser)


def stance_instruction(key: str, seed: int, supports: bool) -> str:
    """A wording that asks for evidence for (``supports``) or against the query."""
    return _chooser(key, seed).choice(SUPPORT_TEMPLATES if supports else REFUTE_TEMPLATES)


def facet_instruction(key: str, seed: int, facet: str) -> str:
    """An instruction naming one MedQuAD question type: a frame filled with the facet's name,
    or one of the builders' own training phrasings ("How is it treated?")."""
    chooser = _chooser(key, seed)
    options = [frame.format(facet=words) for frame in FACET_FRAMES for words in FACET_WORDS[facet]]
    options += FACET_PHRASINGS.get(facet, ())
    return _capitalised(chooser.choice(options))


def all_instructions() -> set[str]:
    """Every wording the functions above can return (for checks against the evaluation's)."""
    wordings = {_capitalised(t.format(aspect=a)) for kind in KINDS for t in TEMPLATES[kind] for a in ASPECTS}
    for facet, names in FACET_WORDS.items():
        wordings |= {_capitalised(frame.format(facet=words)) for frame in FACET_FRAMES for words in names}
        wordings |= set(FACET_PHRASINGS.get(facet, ()))
    return wordings
