"""Three 2-rank LLMs made one after another, each replacing the last in one variable; run as a script
(``python -m tests.engine.tensor_parallel.replacing_engines MODEL_DIR``) so that its exit is seen whole."""
from __future__ import annotations

import sys

from autoglm import LLM, SamplingParams
from autoglm.engine.errors import EngineBrokenError

SETTINGS = {"dtype": "float32", "max_context_len": 64, "block_size": 4, "kv_cache_memory": "1MiB"}
PARAMS = SamplingParams(max_tokens=3, ignore_eos=True)


def main(model_dir: str) -> None:
    llm = replaced = None
    for round in range(3):
        replaced, llm = llm, LLM(model=model_dir, tensor_parallel_size=2, **SETTINGS)
        (output,) = llm.generate([[5, 6, 7]], PARAMS, use_tqdm=False)
        print(f"round {round}: {output.outputs[0].token_ids}", flush=True)
    try:
        replaced.generate([[5, 6, 7]], PARAMS, use_tqdm=False)
    except EngineBrokenError as error:
        print(f"replaced: {error}", flush=True)


if __name__ == "__main__":  # the workers are spawned: they import this module, and must not run it
    main(sys.argv[1])
