"""The CIA World Factbook's country fields: a subject is a country, an aspect one field
(climate, exports, languages ...). The whole source is held out from training by default: it is
the dev set in a domain (geography and civics) that no training group covers.

A country has dozens of fields; each group takes a seeded sample of the fields below (chosen
because each answers a question a user would ask in other words than the field's name)."""

from __future__ import annotations

from pathlib import Path

from ...jsonl import read_jsonl
from .drafts import SubjectDraft, keep_subject
from .passages import cut, long_enough
from .wording import aspects

FACTBOOK_ASPECTS = aspects(
    {
        "Climate": (("the climate", "the weather through the year", "temperatures and rainfall"),
                    ("What is the weather like?",)),
        "Terrain": (("the terrain", "the landscape", "mountains, plains and relief"), ("Is it mountainous or flat?",)),
        "Natural resources": (("natural resources", "what lies under the ground", "minerals and raw materials"), ()),
        "Natural hazards": (("natural hazards", "earthquakes, floods and storms", "natural disasters"),
                            ("Is it prone to natural disasters?",)),
        "Languages": (("the languages", "what people speak", "the official tongue"), ("What language do they speak?",)),
        "Religions": (("religion", "faith and belief", "the religious make-up"), ("What religion do people follow?",)),
        "Ethnic groups": (("ethnic groups", "the ethnic make-up of the population", "peoples and ancestry"), ()),
        "Capital": (("the capital city", "where the government sits", "the seat of government"),
                    ("What is the capital?",)),
        "Exports - commodities": (("exports", "what it sells abroad", "its main export goods"),
                                  ("What does it export?",)),
        "Imports - commodities": (("imports", "what it buys from abroad", "goods it brings in"),
                                  ("What does it import?",)),
        "Industries": (("industry", "what its factories make", "the main industries"), ()),
        "Agricultural products": (("farming", "agriculture and crops", "what farmers grow"), ("What do they grow?",)),
        "Executive branch": (("the head of state and government", "who runs the country", "the executive"),
                             ("Who is the president or prime minister?",)),
        "Judicial branch": (("the courts", "the judiciary", "the legal system and its judges"), ()),
        "Legislative branch": (("the parliament", "the legislature", "how laws are made"), ()),
        "Military and security forces": (("the armed forces", "the military", "defence forces"), ()),
        "Flag": (("the flag", "what the national flag looks like", "the flag's colours"), ()),
        "National anthem(s)": (("the national anthem", "the national song"), ()),
        "Environment - current issues": (("environmental problems", "pollution and deforestation",
                                          "ecological issues"), ()),
        "Life expectancy at birth": (("life expectancy", "how long people live", "longevity"), ()),
        "Currency": (("the currency", "the money used", "the exchange rate"), ()),
        "Exchange rates": (("the currency", "the money used", "the exchange rate"), ()),
        "Airports": (("airports", "air travel infrastructure", "how many airfields there are"), ()),
        "Population": (("the population", "how many people live there", "the number of inhabitants"),
                       ("How many people live there?",)),
        "Independence": (("independence", "when it became independent", "the end of colonial rule"), ()),
        "Background": (("the history", "its historical background", "how it came to be"), ()),
    }
)  # fmt: skip
_SAME_AS = {"Exchange rates": "Currency"}  # two field names for one aspect: the first present is kept
FACTBOOK_QUERIES = ("Tell me about {s}.", "What should I know about {s}?", "{s} country profile", "Facts about {s}")


def read_factbook(folder: Path) -> list[SubjectDraft]:
    countries: dict[str, dict[str, str]] = {}
    for _, row in read_jsonl(folder / "factbook_fields.jsonl"):
        field_name = _SAME_AS.get(row["facet"], row["facet"])
        if field_name not in FACTBOOK_ASPECTS:
            continue
        text = cut(row["passage"])
        if long_enough(text):
            countries.setdefault(row["subject"], {}).setdefault(field_name, text)
    return [
        SubjectDraft("factbook", country, country, "countries", passages, FACTBOOK_ASPECTS, FACTBOOK_QUERIES)
        for country, passages in countries.items()
        if keep_subject(passages)
    ]
