"""How ``autoglm bench images`` shows a run: one table of every measure, on the terminal and in the docs,
read from the results document so that both say the same."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from autoglm.bench.images.measure import ImagesRun, ImagesSettings
from autoglm.bench.images.screenshots import SCREENSHOT_SIZE
from autoglm.bench.lib.engine_run import BASELINE_SIDE, ENGINE_SIDE
from autoglm.bench.results.formats import bold, duration, percent, ratio
from autoglm.bench.results.report import format_table, machine_info, print_and_write

HEADER = ["measure", "median", "min - max"]


def images_document(settings: ImagesSettings, run: ImagesRun) -> dict[str, Any]:
    """Everything needed to read or reproduce the run, for ``--output-json``."""
    image, engine = run.inputs.images[0], run.engine
    ttft: dict[str, Any] = {ENGINE_SIDE: engine.cold_ttft_s.to_dict()}
    dtypes = {ENGINE_SIDE: engine.compute_dtype}
    if run.baseline is not None:
        ttft[BASELINE_SIDE] = run.baseline.ttft_s.to_dict()
        ttft["speedup"] = run.baseline.ttft_s.median / engine.cold_ttft_s.median
        dtypes[BASELINE_SIDE] = run.baseline.compute_dtype
    return {
        "settings": {
            "screenshot_size": list(SCREENSHOT_SIZE),
            "max_pixels": settings.max_pixels,
            "batch_size": settings.batch_size,
            "num_iters": settings.num_iters,
            "baseline": settings.baseline,
            "engine": settings.config.model_dump(),
        },
        "machine": machine_info(),
        "dtypes": dtypes,
        "shapes": run.shapes,
        "image": {
            "grid_thw": list(image.grid_thw),
            "patches": image.pixel_values.shape[0],
            "prompt_tokens": len(run.inputs.prompts[0].token_ids),
            "preprocess_s": run.inputs.preprocess_s.to_dict(),
        },
        "ttft_s": ttft,
        "prefix_cache": {
            "cold_ttft_s": engine.cold_ttft_s.to_dict(),
            "hit_ttft_s": engine.hit_ttft_s.to_dict(),
            "cached_tokens": engine.cached_tokens,
            "speedup": engine.cold_ttft_s.median / engine.hit_ttft_s.median,
        },
        "encoder_images_per_s": {
            "one_at_a_time": engine.one_at_a_time.to_dict(),
            "batched": engine.batched.to_dict(),
            "speedup": engine.batched.median / engine.one_at_a_time.median,
        },
        "encoder_profile": engine.profile.to_dict(),
    }


def _seconds(samples: dict[str, Any]) -> list[str]:
    return [duration(samples["median"]), f"{duration(samples['min'])} - {duration(samples['max'])}"]


def _images_per_s(samples: dict[str, Any]) -> list[str]:
    return [f"{samples['median']:.2f} images/s", f"{samples['min']:.2f} - {samples['max']:.2f}"]


def table_rows(document: dict[str, Any]) -> list[list[str]]:
    """Each measure's median and range; the ratios bold in the median column."""
    settings, image, ttft = document["settings"], document["image"], document["ttft_s"]
    cache, encoder = document["prefix_cache"], document["encoder_images_per_s"]
    width, height = settings["screenshot_size"]
    _, rows, columns = image["grid_thw"]
    patch = document["shapes"]["vision"]["patch_size"]
    rows_out = [
        [f"preprocessing the {width}x{height} screenshot to {columns * patch}x{rows * patch} "
         f"(max_pixels {settings['max_pixels']:,}; {image['patches']:,} patches)", *_seconds(image["preprocess_s"])],
        [f"TTFT, engine ({image['prompt_tokens']:,}-token prompt, cold)", *_seconds(ttft[ENGINE_SIDE])],
    ]
    if BASELINE_SIDE in ttft:
        rows_out += [["TTFT, transformers (forward: encoder + prefill)", *_seconds(ttft[BASELINE_SIDE])],
                     ["TTFT speed-up of the engine", bold(ratio(ttft["speedup"])), ""]]
    rows_out += [
        [f"TTFT, the same screenshot again ({cache['cached_tokens']:,} tokens from the prefix cache)",
         *_seconds(cache["hit_ttft_s"])],
        ["TTFT saved by the prefix-cache hit", bold(ratio(cache["speedup"])), ""],
        ["encoder, one image a call", *_images_per_s(encoder["one_at_a_time"])],
        [f"encoder, {settings['batch_size']} images in one call", *_images_per_s(encoder["batched"])],
        ["batched over one at a time", bold(ratio(encoder["speedup"])), ""],
    ]
    profile = document["encoder_profile"]
    shares = "; ".join(f"{name} {percent(profile[f'{name}_s'] / profile['total_s'])}"
                       for name in ("linear", "attention", "other"))
    rows_out.append([f"one image's encoder call, profiled ({profile['attention_calls']} attention calls)",
                     duration(profile["total_s"]), shares])
    return rows_out


def report_images(settings: ImagesSettings, run: ImagesRun, output_json: Path | None) -> None:
    document = images_document(settings, run)
    summary = [format_table(HEADER, table_rows(document)),
               f"dtypes: {document['dtypes']}; TTFT from a prompt of token ids and preprocessed pixels"]
    print_and_write(summary, document, output_json)
