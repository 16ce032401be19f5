"""The adapters an engine keeps loaded in memory, at most ``max_cpu_loras``, with the requests using each.

Loading past the limit unloads the least recently used idle adapter, or raises LoRACapacityError when every one
has requests in flight. Unloading drains: the adapter takes no new request at once, and goes when its last
request ends.
"""
from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Callable

from autoglm.errors import LoRAAdapterError, LoRAAdapterNotFoundError, LoRACapacityError, quote_value
from autoglm.lora_adapter import LoRAAdapter
from autoglm.lora_request import LoRARequest


class LoadedAdapters:
    """Adapters by served name, least recently used first; not thread-safe (the engine's thread owns it)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._adapters: OrderedDict[str, LoRAAdapter] = OrderedDict()
        self._requests: Counter[str] = Counter()  # unfinished requests per adapter name
        self._draining: dict[str, list[Callable[[], None]]] = {}  # name -> what to call once it is unloaded

    def holds(self, request: LoRARequest) -> bool:
        """Whether this very adapter (name and folder) is loaded and not draining: loading it again is a no-op."""
        adapter = self._adapters.get(request.lora_name)
        return adapter is not None and adapter.request.lora_path == request.lora_path \
            and request.lora_name not in self._draining

    def add(self, adapter: LoRAAdapter) -> None:
        """Keep ``adapter``, unloading the least recently used idle one if the limit is reached."""
        name = adapter.name
        if self.holds(adapter.request):
            self._adapters.move_to_end(name)
            return
        if name in self._adapters:
            state = "being unloaded" if name in self._draining else "loaded"
            raise LoRAAdapterError(
                f"LoRA adapter {quote_value(name)} is already {state} from "
                f"{quote_value(self._adapters[name].request.lora_path)}; unload it before loading "
                f"{quote_value(adapter.request.lora_path)} under that name")
        same_id = [other.name for other in self._adapters.values()
                   if other.request.lora_int_id == adapter.request.lora_int_id]
        if same_id:
            raise LoRAAdapterError(f"LoRA adapter {quote_value(name)}: lora_int_id {adapter.request.lora_int_id} is "
                                   f"already {quote_value(same_id[0])}'s; give each adapter an id of its own")
        if len(self._adapters) >= self.capacity:
            idle = [other for other in self._adapters if not self._requests[other] and other not in self._draining]
            if not idle:
                raise LoRACapacityError(
                    f"cannot load LoRA adapter {quote_value(name)}: all {self.capacity} loaded adapters "
                    "(max_cpu_loras) have requests in flight; retry when one is idle, or raise max_cpu_loras")
            del self._adapters[idle[0]]
        self._adapters[name] = adapter

    def lookup(self, request: LoRARequest) -> LoRAAdapter:
        """The loaded adapter ``request`` names; LoRAAdapterNotFoundError if it is not loaded or is being unloaded."""
        adapter = self._adapters.get(request.lora_name)
        if adapter is None or request.lora_name in self._draining:
            loaded = ", ".join(self.names()) or "none"
            raise LoRAAdapterNotFoundError(
                f"LoRA adapter {quote_value(request.lora_name)} is not loaded"
                f"{' (it is being unloaded)' if adapter is not None else ''}; loaded: {loaded}", param="model")
        if adapter.request.lora_path != request.lora_path:
            raise LoRAAdapterError(
                f"LoRA adapter {quote_value(request.lora_name)} is loaded from "
                f"{quote_value(adapter.request.lora_path)}, not {quote_value(request.lora_path)}", param="model")
        return adapter

    def acquire(self, request: LoRARequest) -> LoRAAdapter:
        """:meth:`lookup`, and the adapter counted in use until :meth:`release`."""
        adapter = self.lookup(request)
        self._requests[request.lora_name] += 1
        self._adapters.move_to_end(request.lora_name)
        return adapter

    def release(self, name: str) -> None:
        """A request of adapter ``name`` ended; a draining adapter whose last request it was is unloaded now."""
        self._requests[name] -= 1
        if self._requests[name] <= 0:
            del self._requests[name]
            if name in self._draining:
                self._unload(name)

    def remove(self, name: str, on_unloaded: Callable[[], None]) -> None:
        """Refuse new requests for ``name`` from now on and unload it once its requests have ended, then call
        ``on_unloaded`` (at once if it has none); LoRAAdapterNotFoundError if no adapter has that name."""
        if name not in self._adapters:
            raise LoRAAdapterNotFoundError(f"no LoRA adapter {quote_value(name)} is loaded; loaded: "
                                           f"{', '.join(self.names()) or 'none'}")
        self._draining.setdefault(name, []).append(on_unloaded)
        if not self._requests[name]:
            self._unload(name)

    def _unload(self, name: str) -> None:
        del self._adapters[name]
        for callback in self._draining.pop(name, []):
            callback()

    def names(self) -> list[str]:
        return [name for name in self._adapters if name not in self._draining]

    def requests(self) -> list[LoRARequest]:
        """The loaded adapters that take requests (not draining), least recently used first."""
        return [adapter.request for name, adapter in self._adapters.items() if name not in self._draining]
