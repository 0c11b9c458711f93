"""GPU names as people and tools write them, mapped to the catalogue.

nvidia-smi and NVML print names like "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB",
"Tesla V100-SXM2-32GB" or "NVIDIA GeForce RTX 4090 D"; rocm-smi and amd-smi print
"AMD Instinct MI300X OAM" or "AMD Instinct MI250X/MI250"; people write "h100-80gb",
"A100 80GB" or "4090". A name is reduced to a compact form (vendor and brand words,
form factor and memory-type words, spacing and punctuation dropped; the memory size kept)
and looked up among each card's compact forms. A name that fits no card, or more than
one (a bare "A100", a truncated "NVIDIA A100-SXM..."), gives None: never a wrong card.
"""

from __future__ import annotations

import difflib
import re
from typing import TYPE_CHECKING

from fleet.gpu_catalog import CATALOGUE, GpuModel

if TYPE_CHECKING:
    from core.i18n import Message

MAX_NAME_CHARS = 200  # a real device name is under 100; longer input is not a name

# Words that name the vendor, the brand, the form factor or the memory type: they never
# tell two catalogue cards apart ("NVIDIA H100 PCIe" and "NVIDIA H100 80GB HBM3" are one
# entry). "NVL" and the memory size are kept: they do tell cards apart.
_NOISE = frozenset(
    {
        "nvidia", "tesla", "geforce", "quadro", "rtx", "amd", "instinct", "radeon", "ati",
        "pcie", "sxm", "sxm2", "sxm3", "sxm4", "sxm5", "sxm6", "oam", "hbm", "hbm2", "hbm2e",
        "hbm3", "hbm3e", "gddr6", "gddr6x", "gddr7", "generation", "gpu", "vf", "series",
        "card",
    }
)  # fmt: skip
_LABEL = re.compile(r"^\s*[A-Za-z][A-Za-z _]{1,40}:\s*(?=\S)")  # "Product Name : ", "Card series: "
_WORD = re.compile(r"[a-z0-9]+")
_TARGET = re.compile(r"\((?:gfx|sm_?)\w*[^)]*\)")  # ROCm's "(gfx942:sramecc+:xnack-)" after the name
_TRUNCATED = re.compile(r"(\.\.\.|…)\s*$")

# Compact forms beyond a card's key and name (both are read already). A family that comes in
# several memory sizes (A100, A800, V100) has no form without its size, so a bare "A100"
# stays ambiguous.
_ALIASES: dict[str, tuple[str, ...]] = {
    "h100-80gb": ("h100",),
    "h100-nvl": ("h100nvl94gb", "h100nvl96gb"),
    "h200-nvl": ("h200nvl141gb",),
    "h800": ("h80080gb",),
    "h20": ("h2096gb",),
    "mi250": ("mi250x", "mi250xmi250", "mi250gcd"),
}


def compact(text: str) -> str:
    """The name reduced to what tells cards apart: "NVIDIA A100-SXM4-80GB" -> "a10080gb"."""
    text = _TARGET.sub(" ", _LABEL.sub("", text[:MAX_NAME_CHARS]).lower())
    text = re.sub(r"(\d+)\s*(gb|gib|g)\b", r"\1gb", text)  # "80 GB", "80G" -> "80gb"
    text = re.sub(r"\brtx(?=\d)", "rtx ", text)  # "RTX4090" as people type it
    return "".join(word for word in _WORD.findall(text) if word not in _NOISE)


def _forms() -> dict[str, set[str]]:
    """Compact form -> the catalogue keys it names (more than one: ambiguous)."""
    forms: dict[str, set[str]] = {}
    for gpu in CATALOGUE.values():
        for form in {compact(gpu.key), compact(gpu.name), *_ALIASES.get(gpu.key, ())}:
            forms.setdefault(form, set()).add(gpu.key)
    return forms


_FORMS = _forms()


def find_gpu(text: str) -> GpuModel | None:
    """The catalogue card `text` names (key, catalogue name, or a name as nvidia-smi, NVML,
    DCGM, rocm-smi or a person writes it); None when it names none or more than one."""
    if not isinstance(text, str) or not text.strip() or len(text) > MAX_NAME_CHARS:
        return None
    if text in CATALOGUE:
        return CATALOGUE[text]
    wanted = compact(text)
    if not wanted:
        return None
    if _TRUNCATED.search(text):  # nvidia-smi cut the name: it counts only if one card fits
        keys = {key for form, ks in _FORMS.items() if form.startswith(wanted) for key in ks}
    else:
        keys = _FORMS.get(wanted, set())
    return CATALOGUE[next(iter(keys))] if len(keys) == 1 else None


def close_matches(text: str, *, limit: int = 5) -> list[str]:
    """Catalogue keys whose names look like `text`, best first (for "did you mean"): the
    cards whose names start with it ("A100": both A100s), then the similar ones."""
    wanted = compact(text) if isinstance(text, str) else ""
    if not wanted:
        return []
    started = sorted(form for form in _FORMS if form.startswith(wanted))
    similar = difflib.get_close_matches(wanted, list(_FORMS), n=limit * 3, cutoff=0.5)
    keys: list[str] = []
    for form in [*started, *similar]:
        for key in sorted(_FORMS[form]):
            if key not in keys:
                keys.append(key)
    return keys[:limit]


def unknown_gpu(text: str) -> Message:
    """The error for a name that is no catalogue card, with the close matches."""
    from core.i18n import later  # Django's: the rest of this module runs where only NVML is (device_check)

    shown = repr(text[:60] + ("…" if len(text) > 60 else "")) if isinstance(text, str) else repr(text)
    matches = close_matches(text)
    if matches:
        return later(
            "unknown GPU %(name)s; close matches: %(matches)s",
            name=shown,
            matches=", ".join(matches),
        )
    return later(
        "unknown GPU %(name)s; known: %(known)s",
        name=shown,
        known=", ".join(CATALOGUE),
    )
