"""/v1/models' cards: each served model by name, and each loaded version of a registry's model with its aliases."""
from __future__ import annotations

from typing import Literal

from autoglm.server.lora.served_adapter import ServedAdapter
from autoglm.server.versions.routing import ModelRouter
from autoglm.server.versions.served_version import ServedVersion
from autoglm.server.openai.responses import ModelCard


def model_cards(router: ModelRouter, created: int) -> list[ModelCard]:
    """A card per model (the served name, not the folder: where a model sits on disk is no client's business);
    from a registry, then a card per loaded version, its parent the model. An adapter's card says what vLLM's
    does: its folder as root, its base's name as parent."""
    cards = []
    for routes in router.routes.values():
        stable = router.stable_of(routes.name)
        if stable is None:
            continue
        root, parent = ((stable.lora.lora_path, stable.base.name) if isinstance(stable, ServedAdapter)
                        else (stable.version_id, None))
        cards.append(ModelCard(id=routes.name, created=created, root=root, parent=parent,
                               max_model_len=stable.engine.max_context_len, input_modalities=_modalities(stable),
                               tasks=_tasks(stable)))
        if not routes.stable:  # one model, no versions
            continue
        cards += [ModelCard(id=served.version_id, created=created, root=served.version_id, parent=routes.name,
                            max_model_len=served.engine.max_context_len,
                            aliases=routes.aliases_of(served.version), input_modalities=_modalities(served),
                            tasks=_tasks(served))
                  for served in router.loaded_versions(routes.name)]
    return cards


def _modalities(served: ServedVersion) -> list[Literal["text", "image"]]:
    return ["text", "image"] if served.images is not None else ["text"]


def _tasks(served: ServedVersion) -> list[str]:
    pooling = served.engine.pooling_model
    return ["generate"] if pooling is None else list(pooling.tasks)
