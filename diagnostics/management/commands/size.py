"""`manage.py size --model NAME|--hf-id ORG/NAME|--config FILE --gpu NAME|--gpu-memory-gib G --gpus N
[...] [--json]`: the sizing page's answer in a terminal, from the same form and calculator.
--hf-id takes the model from the catalogue or fetches it from the Hugging Face Hub (HF_ENDPOINT,
HF_TOKEN) into it; --refresh fetches it again. --host NAME --model-dir PATH has the host's live
agent read the model's directory there and adds it to the catalogue (the console's worker stores
the agent's answer; --wait bounds the wait). --gpu takes a catalogue key or the name
nvidia-smi prints; a GPU outside the catalogue is given by its memory (--gpu-memory-gib, or
--gpu-memory-mib as nvidia-smi's memory.total)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.http import QueryDict

from diagnostics import host_model_service, hub_service, sizing_service
from diagnostics.forms import SizingForm
from diagnostics.models import ModelSpec
from diagnostics.sizing import catalog, hub
from diagnostics.sizing.architecture import ConfigError
from fleet import gpu_catalog, gpu_names

# CLI option -> form field; every one optional, blank meaning vLLM's default.
OPTIONS = (
    ("--tp", "tensor_parallel_size", int, "tensor parallel size (default: all GPUs)"),
    ("--pp", "pipeline_parallel_size", int, "pipeline parallel size (default 1)"),
    (
        "--gpu-memory-utilization",
        "gpu_memory_utilization",
        float,
        "fraction of each GPU (default: the version's)",
    ),
    ("--max-model-len", "max_model_len", int, "context length (default: the model's)"),
    ("--max-num-seqs", "max_num_seqs", int, "concurrent sequences (default: vLLM's for the GPU)"),
    ("--max-num-batched-tokens", "max_num_batched_tokens", int, "tokens per step (default: vLLM's)"),
    ("--kv-cache-dtype", "kv_cache_dtype", str, "auto or fp8 (default auto)"),
    ("--dtype", "dtype", str, "auto, bfloat16, float16 or float32 (default auto)"),
    ("--quantization", "quantization", str, "none, fp8, awq, gptq, ... (default: the checkpoint's)"),
    ("--block-size", "block_size", int, "KV block size in tokens (default: vLLM's)"),
    ("--avg-prompt-tokens", "avg_prompt_tokens", int, "expected average prompt (default 1500)"),
    ("--avg-output-tokens", "avg_output_tokens", int, "expected average output (default 500)"),
    ("--vllm-version", "vllm_version", str, "vLLM version, like 0.11.2 (default 0.21)"),
    ("--other-used-gib", "other_used_gib", float, "GiB other processes hold on each GPU"),
)


class Command(BaseCommand):
    help = "Size a model on GPUs with vLLM flags: weights, KV cache, concurrency, whether it starts."

    def add_arguments(self, parser):
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("--model", help="a catalogue model: key, Hugging Face id or alias")
        which.add_argument(
            "--hf-id",
            help="a Hugging Face model id (ORG/NAME): from the catalogue, or fetched from the hub "
            "(HF_ENDPOINT, HF_TOKEN) and kept there",
        )
        which.add_argument("--config", help="a config.json file (not added to the catalogue)")
        which.add_argument(
            "--host",
            help="a GPU host whose live agent reads --model-dir there (config.json, the safetensors "
            "index, the weights' sizes); the model is added to the catalogue",
        )
        parser.add_argument("--model-dir", help="with --host: the model's directory on the host (absolute)")
        parser.add_argument(
            "--wait",
            type=float,
            default=host_model_service.ANSWER_WITHIN_S,
            help=f"with --host: seconds to wait for the agent (default {host_model_service.ANSWER_WITHIN_S})",
        )
        parser.add_argument(
            "--index", help="with --config: model.safetensors.index.json for exact weight bytes"
        )
        parser.add_argument(
            "--params-billions",
            type=float,
            help="with --config, or --hf-id for a model without safetensors: the parameter count",
        )
        parser.add_argument(
            "--refresh", action="store_true", help="with --hf-id: fetch it again, even if in the catalogue"
        )
        parser.add_argument(
            "--gpu",
            help='GPU model, like h100-80gb, L40S or "NVIDIA A100-SXM4-80GB" as nvidia-smi prints it; '
            '"custom" with --gpu-memory-gib/--gpu-memory-mib for another GPU',
        )
        memory = parser.add_mutually_exclusive_group()
        memory.add_argument("--gpu-memory-gib", type=float, help="another GPU: its memory per GPU in GiB")
        memory.add_argument(
            "--gpu-memory-mib", type=int, help="another GPU: its memory as nvidia-smi's memory.total (MiB)"
        )
        parser.add_argument("--gpus", type=int, default=1, help="GPUs (default 1)")
        for flag, dest, kind, text in OPTIONS:
            parser.add_argument(flag, dest=dest, type=kind, help=text)
        parser.add_argument("--enforce-eager", action="store_true", help="no CUDA graphs")
        parser.add_argument("--json", action="store_true", help="print the whole result as JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        extra = _config_model(options) if options["config"] else None
        query = QueryDict(mutable=True)
        if extra:
            query["model"] = extra.key
        elif options["hf_id"]:
            query["model"] = self._hub_model(options)
        elif options["host"]:
            query["model"] = self._host_model(options)
        else:
            query["model"] = _model_key(options["model"])
        query.update(_gpu_values(options))
        query["gpus"] = str(options["gpus"])
        for _, dest, _, _ in OPTIONS:
            if options.get(dest) is not None:
                query[dest] = str(options[dest])
        if options["enforce_eager"]:
            query["enforce_eager"] = "on"
        form = SizingForm(query, extra=extra)
        if not form.is_valid():
            problems = "; ".join(f"{name}: {' '.join(errors)}" for name, errors in form.errors.items())
            raise CommandError(problems)
        try:
            result = sizing_service.run(form)
        except sizing_service.SizingInputError as exc:
            raise CommandError(str(exc)) from None
        if options["json"]:
            self.stdout.write(json.dumps(result.to_dict(), indent=2))
        else:
            self.stdout.write(_text(result.to_dict()))

    def _hub_model(self, options: dict[str, Any]) -> str:
        """The catalogue key of the --hf-id model, fetched from the hub when needed."""
        params = options.get("params_billions")
        try:
            spec, fetched = hub_service.model_for_hf_id(
                options["hf_id"], refresh=options["refresh"], params_total=params * 1e9 if params else None
            )
        except hub.HubError as exc:
            hint = " (here: --config path/to/config.json)" if exc.offers_upload else ""
            raise CommandError(f"{exc}{hint}") from None
        if fetched:
            self.stderr.write(
                f"fetched {spec.hf_id} from {settings.HF_ENDPOINT} into the catalogue as {spec.key}"
            )
        return spec.key

    def _host_model(self, options: dict[str, Any]) -> str:
        """The catalogue key of the model the --host's agent read in --model-dir."""
        model_dir = (options.get("model_dir") or "").strip()
        if not model_dir.startswith("/"):
            raise CommandError(
                "--host needs --model-dir, an absolute path on the host, like /models/Qwen3-8B"
            )
        if options["wait"] <= 0:
            raise CommandError("--wait must be a number of seconds above 0")
        try:
            asked = host_model_service.ask_host(
                host=options["host"], model_dir=model_dir, wait_s=options["wait"]
            )
        except host_model_service.NoAgent as exc:
            raise CommandError(f"{exc} (here: --config path/to/config.json)") from None
        result = host_model_service.outcome(asked)
        while result.waiting:
            time.sleep(0.25)
            asked.refresh_from_db()
            result = host_model_service.outcome(asked)
        if result.error is not None:
            raise CommandError(str(result.error))
        self.stderr.write(f"{options['host']}:{model_dir} is in the catalogue as {result.spec.key}")
        return result.spec.key


def _model_key(name: str) -> str:
    entry = catalog.find(name, ModelSpec.objects.all().entries())
    if entry is None:
        known = ", ".join(ModelSpec.objects.values_list("key", flat=True)[:30])
        fetch = (
            f"--hf-id {name.strip()} to fetch it from Hugging Face, or "
            if hub.looks_like_id(name.strip())
            else ""
        )
        raise CommandError(
            f"no model {name!r} in the sizing catalogue (known: {known}); or use {fetch}--config FILE"
        )
    return entry.key


def _gpu_values(options: dict[str, Any]) -> dict[str, str]:
    """The form's GPU inputs: a catalogue key, or "custom" and the memory."""
    name = options.get("gpu")
    memory = {
        field: str(options[field])
        for field in ("gpu_memory_gib", "gpu_memory_mib")
        if options.get(field) is not None
    }
    if memory:
        if name and name != gpu_catalog.CUSTOM_KEY:
            raise CommandError(
                f"--gpu {name} has its own memory; use --gpu custom (or leave --gpu out) with the memory"
            )
        return {"gpu": gpu_catalog.CUSTOM_KEY, **memory}
    if not name or name == gpu_catalog.CUSTOM_KEY:
        raise CommandError("give --gpu NAME, or the GPU's memory with --gpu-memory-gib or --gpu-memory-mib")
    gpu = gpu_names.find_gpu(name)
    if gpu is None:
        raise CommandError(str(gpu_names.unknown_gpu(name)))
    return {"gpu": gpu.key}


def _read(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise CommandError(f"cannot read {path}: {exc.strerror}") from None


def _config_model(options: dict[str, Any]) -> ModelSpec:
    params = options.get("params_billions")
    try:
        entry = catalog.entry_from_upload(
            config_text=_read(options["config"]),
            index_text=_read(options["index"]) if options.get("index") else None,
            params_total=params * 1e9 if params else None,
        )
    except ConfigError as exc:
        raise CommandError(str(exc)) from None
    return ModelSpec.from_entry(entry, source=ModelSpec.Source.UPLOADED)


def _gpu_label(result: dict[str, Any]) -> str:
    if result["gpu"] == gpu_catalog.CUSTOM_KEY:
        return f"GPU of {result['gpu_memory_mib']:,} MiB"
    return str(result["gpu"])


def _text(result: dict[str, Any]) -> str:
    flags = result["flags"]
    lines = [
        f"{result['model']} on {result['gpus']} x {_gpu_label(result)}, vLLM {result['vllm_version']}: "
        + ("starts" if result["fits"] else "WILL NOT START"),
        "  " + "  ".join(f"{k}={v}" for k, v in flags.items() if v not in (None, "")),
        "",
    ]
    width = max(len(f["label"]) for f in result["figures"])
    for f in result["figures"]:
        value = f"{f['value']:,.2f}" if f["unit"] in ("GiB", "x") else f"{f['value']:,.0f}"
        lines.append(f"  {f['label']:<{width}}  {value:>12} {f['unit']:<8} {f['formula']}")
    if result["error"]:
        lines += ["", "vLLM would stop with:", f"  {result['error']}", "Change one of:"]
        lines += [f"  {fix}" for fix in result["fixes"]]
    lines += ["", "Recommended flags:"]
    for row in result["recommendations"]["scenarios"]:
        seqs = row["max_num_seqs"] or "-"
        lines.append(
            f"  {row['label']:<20} --max-num-batched-tokens {row['max_num_batched_tokens']:<6} "
            f"--max-num-seqs {seqs:<5} ({row['concurrency_at_context']} at once)"
        )
    host = result["recommendations"]["host"]
    lines += [
        f"  host RAM {host['host_ram_gib']} GiB, container request {host['container_request_gib']} GiB, "
        f"limit {host['container_limit_gib']} GiB, /dev/shm {host['shm_gib']} GiB",
    ]
    lines += [f"note: {note}" for note in result["notes"]]
    return "\n".join(lines)
