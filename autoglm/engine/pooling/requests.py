"""What a pooling engine checks of a request before it is queued, and what it hands back once its prompt is read."""
from __future__ import annotations

from autoglm.engine.pooling.model_kind import PoolingModel
from autoglm.engine.request_state import RequestState
from autoglm.errors import InvalidRequestError, quote_value
from autoglm.outputs import PoolingOutput, PoolingRequestOutput
from autoglm.pooling_params import PoolingParams

WHICH_MODELS_POOL = (
    "pooling models are embedding checkpoints (sentence-transformers folders, *Model architectures, or any decoder "
    "served with runner 'pooling'), *ForSequenceClassification checkpoints, and causal LMs served with "
    "classifier_from_token"
)


def check_pooling_params(model: PoolingModel | None, params: PoolingParams) -> None:
    """Refuse a pooling request the engine's model cannot serve, naming what it can."""
    if model is None:
        raise InvalidRequestError(f"this model generates text and does not pool (runner 'generate'); {WHICH_MODELS_POOL}")
    if params.task not in model.tasks:
        raise InvalidRequestError(f"task {quote_value(params.task)} is not served by this {_describe(model)}; it serves: "
                                  f"{', '.join(model.tasks)}", param="task")
    if params.dimensions is not None:
        sizes = model.matryoshka_dimensions
        if sizes is None:
            raise InvalidRequestError("dimensions is not supported: this model has no Matryoshka embedding sizes "
                                      "(the matryoshka_dimensions setting, or the checkpoint config's)", param="dimensions")
        if params.dimensions not in sizes:
            raise InvalidRequestError(f"dimensions must be one of {', '.join(map(str, sizes))}, got "
                                      f"{quote_value(params.dimensions)}", param="dimensions")


def refuse_generation(model: PoolingModel) -> InvalidRequestError:
    """The error for a generation request on a pooling engine."""
    return InvalidRequestError(f"this model is a {_describe(model)} served with runner 'pooling': it does not generate "
                               f"text; it serves {', '.join(model.tasks)} requests")


def pooled_output(state: RequestState) -> PoolingRequestOutput:
    """A finished pooling request's output: its vector, made of its one sequence's pool."""
    seq = state.completions[0].seq
    return PoolingRequestOutput(state.request_id, PoolingOutput(seq.pooled.result(seq.num_prompt_tokens)),
                                state.prompt_token_ids, True, state.metrics, state.num_cached_tokens)


def _describe(model: PoolingModel) -> str:
    return {"embed": "embedding model", "classify": "sequence classifier",
            "token_pair": "yes/no reranker (classifier_from_token)"}[model.kind]
