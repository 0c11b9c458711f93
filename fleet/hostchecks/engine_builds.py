"""Which NVIDIA driver and CUDA an engine release needs, and versions compared as numbers.

Fixed against the guide's script (corrections #14, docs/guide-corrections.md): versions are
compared as numbers (as text, "535.54.03" > "1000.1"); the driver minimum follows the CUDA
the engine release is built for and NVIDIA's driver table, not the script's flat 560.
Sources with addresses: docs/host-agent.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from core.i18n import Message, later

ENGINES = {"vllm": "vLLM", "tgi": "TGI", "ollama": "Ollama", "sglang": "SGLang"}


@dataclass(frozen=True, order=True)
class Version:
    """A dotted version compared as numbers: 535.54.03 < 570.26 < 1000.1, where string
    order would put "535.54.03" after "1000.1". Trailing zeros do not count: 13.0 == 13."""

    parts: tuple[int, ...]
    text: str = field(default="", compare=False)

    @classmethod
    def parse(cls, text: object, *, loose: bool = False) -> Version | None:
        """The version `text` is ("570.133.20", "12.8"); None when it is not one. `loose`
        takes the first dotted number in a longer text ("v0.11.1rc2", "Docker version 27.3.1")."""
        if not isinstance(text, str) or len(text) > 200:
            return None
        match = (_DOTTED.search if loose else _DOTTED.fullmatch)(text.strip())
        if match is None:
            return None
        parts = [int(part) for part in match.group().split(".")]
        while len(parts) > 1 and parts[-1] == 0:
            parts.pop()
        return cls(tuple(parts), match.group())

    @classmethod
    def of(cls, text: str) -> Version:
        """The version `text` is, for versions written in code; ValueError when it is not one."""
        version = cls.parse(text)
        if version is None:
            raise ValueError(f"not a version: {text!r}")
        return version

    def __str__(self) -> str:
        return self.text or ".".join(map(str, self.parts))


_DOTTED = re.compile(r"\d{1,9}(?:\.\d{1,9}){0,5}")


@dataclass(frozen=True)
class EngineBuild:
    """What one release line of an engine needs from the host's NVIDIA driver."""

    engine: str
    since: Version  # the line's first release
    cuda: Version | None  # the CUDA its default build targets; None: picked at run time
    driver: Version  # at or above: pass
    driver_basis: Message
    floor: Version  # at or above (below `driver`): warn; below: fail
    floor_basis: Message
    floor_caveat: Message  # what a driver between the floor and `driver` costs


def _cuda_build(engine: str, since: str, cuda: str, driver: str, floor: str = "525.60.13") -> EngineBuild:
    major = cuda.split(".")[0]
    return EngineBuild(
        engine=engine,
        since=Version.of(since),
        cuda=Version.of(cuda),
        driver=Version.of(driver),
        driver_basis=later("the driver of CUDA %(cuda)s GA", cuda=cuda),
        floor=Version.of(floor),
        floor_basis=later("the oldest driver of CUDA %(major)s.x minor-version compatibility", major=major),
        floor_caveat=later("it runs with a limited feature set (no PTX JIT)"),
    )


# One table: which CUDA each engine release line is built for (the comment on its row), and
# the driver that CUDA needs on Linux x86_64 per NVIDIA's CUDA Toolkit release notes: Table 3
# "CUDA Toolkit and Corresponding Driver Versions" (the GA row: pass at or above) and Table 2
# "minimum required driver for CUDA minor version compatibility" (12.x: 525.60.13, 13.x: 580;
# warn between the two, fail below). The guide's flat 560 is the driver of CUDA 12.6 GA, a
# build no engine here ships by default, so it is not used. docs/host-agent.md has addresses.
ENGINE_BUILDS: tuple[EngineBuild, ...] = (
    # vLLM installation docs, 0.3-0.6: "pre-compiled C++ and CUDA (12.1) binaries"
    _cuda_build("vllm", "0", "12.1", "530.30.02"),
    # vLLM PR 12098 (Jan 2025, released in 0.7.0): "Use CUDA 12.4 as default for release wheels"
    _cuda_build("vllm", "0.7", "12.4", "550.54.14"),
    # vLLM 0.9.0 release notes: "The default wheel has been upgraded from CUDA 12.4 to CUDA 12.8"
    _cuda_build("vllm", "0.9", "12.8", "570.26"),
    # vLLM 0.11.1 release notes: "Updated the default CUDA build to torch==2.9.0+cu129"
    _cuda_build("vllm", "0.11.1", "12.9", "575.51.03"),
    # vLLM 0.20.0 release notes (PR 39878): "Default CUDA wheel ... switched to CUDA 13.0"
    _cuda_build("vllm", "0.20", "13.0", "580.65.06", floor="580"),
    # TGI quick tour: "We also recommend using NVIDIA drivers with CUDA version 12.2 or higher"
    _cuda_build("tgi", "0", "12.2", "535.54.03"),
    # Ollama hardware docs: "driver version 550 and newer" (earlier revisions: 531). Ollama
    # bundles its CUDA runners and picks one for the driver, so it has no CUDA row.
    EngineBuild(
        engine="ollama",
        since=Version.of("0"),
        cuda=None,
        driver=Version.of("550"),
        driver_basis=later("Ollama's documented minimum"),
        floor=Version.of("531"),
        floor_basis=later("the minimum in Ollama's earlier docs"),
        floor_caveat=later("older Ollama releases accept it, the current docs do not"),
    ),
    # SGLang install docs: "uv pip install sglang" installs "CUDA 12.9 support by default"
    _cuda_build("sglang", "0", "12.9", "575.51.03"),
    # SGLang install docs: "SGLang requires CUDA 13 ... 0.5.19 is the last release with a CUDA 12 lane"
    _cuda_build("sglang", "0.5.20", "13.0", "580.65.06", floor="580"),
)


def engine_build(*, engine: str, version: str) -> tuple[EngineBuild, bool]:
    """The table row for `engine` at `version`, and whether the version was understood. A
    version that is not one ("latest", "") gets the newest line, the strictest."""
    rows = [row for row in ENGINE_BUILDS if row.engine == engine]
    if not rows:
        raise ValueError(f"engine {engine!r} is not one of {', '.join(ENGINES)}")
    parsed = Version.parse(version, loose=True)
    if parsed is None:
        return rows[-1], False
    chosen = rows[0]
    for row in rows:
        if row.since <= parsed:
            chosen = row
    return chosen, True
