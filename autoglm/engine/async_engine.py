"""Drives an LLMEngine from one background thread, so the event loop never waits on a forward pass.

The event loop reaches the thread only through a command queue (add, abort). The thread hands
each step's deltas back on one RequestStream per HTTP request (one or more engine requests, one
per prompt), with ``call_soon_threadsafe``. Everything that touches the LLMEngine (which is not
thread-safe) runs on that thread.
"""
from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import PreTrainedTokenizerBase

from autoglm.config import EngineConfig
from autoglm.engine.errors import EngineBrokenError, RequestsFailedError
from autoglm.engine.input_processor import InputProcessor
from autoglm.engine.tokenize import Prompt
from autoglm.engine.llm_engine import LLMEngine
from autoglm.engine.pooling.model_kind import PoolingModel
from autoglm.engine.heartbeat import EngineHeartbeat
from autoglm.engine.request_stream import DeltaObserver, IndexedOutput, RequestStream
from autoglm.engine.sequence import TenantTag
from autoglm.engine.stats import EngineStats
from autoglm.errors import InvalidRequestError
from autoglm.host_allocator import release_free_memory
from autoglm.lora_request import LoRARequest
from autoglm.models.lora import LoRAAdapter
from autoglm.outputs import PoolingRequestOutput
from autoglm.pooling_params import PoolingParams
from autoglm.sampling_params import RequestOutputKind, SamplingParams
from autoglm.structured_outputs import StructuredOutputsParams

logger = logging.getLogger(__name__)


class EngineDeadError(RuntimeError):
    """The engine loop is not running: it was stopped, or it crashed."""


class EngineStepError(RuntimeError):
    """The engine step serving this request failed; the loop goes on serving new requests."""


class QueueFullError(RuntimeError):
    """The waiting queue is at max_waiting_requests."""


class RequestTimeoutError(TimeoutError):
    """The request did not finish within request_timeout_s, so it was aborted."""


# What the engine thread hands a request's stream: a prompt's delta, or the error that ended the request.
StreamItem = IndexedOutput | BaseException


@dataclass
class _AddRequests:
    """One engine request per prompt, admitted together: all of them or none."""

    engine_request_ids: list[str]
    prompts: list[Prompt]
    params: SamplingParams | PoolingParams
    arrival_time: float
    priority: int
    tenant: TenantTag | None
    stream: RequestStream
    lora_request: LoRARequest | None = None


@dataclass
class _AbortRequests:
    engine_request_ids: list[str]


@dataclass
class _InstallLoRA:
    """Load an adapter read off the event loop, between steps; ``done`` is called with None or the error."""

    adapter: LoRAAdapter
    done: Callable[[BaseException | None], None]


@dataclass
class _RemoveLoRA:
    """Unload an adapter once drained; ``done`` is called with None once it is unloaded, or with the error."""

    lora_name: str
    done: Callable[[BaseException | None], None]


_Command = _AddRequests | _AbortRequests | _InstallLoRA | _RemoveLoRA


class AsyncEngine:
    """An LLMEngine behind an async ``generate``, stepped by its own thread."""

    def __init__(self, engine: LLMEngine, max_waiting_requests: int, request_timeout_s: float) -> None:
        self.engine = engine
        self.max_waiting_requests = max_waiting_requests
        self.request_timeout_s = request_timeout_s
        # Replaced by the engine thread after every step; read from anywhere (one attribute store).
        self.stats: EngineStats = engine.get_stats()
        self.heartbeat = EngineHeartbeat()  # whether the thread is stuck in a step (see /health)
        self._commands: deque[_Command] = deque()
        self._wakeup = threading.Condition()
        self._stopping = False
        self._dead = False  # set under the _wakeup lock once the thread takes no more commands
        self._broken: EngineBrokenError | None = None  # set under the _wakeup lock; the thread then leaves
        engine.notify_when_broken(self._engine_broken)
        engine.notify_when_mask_ready(self._mask_ready)
        # Engine request id -> its HTTP request's stream and its prompt's index; engine thread only.
        self._streams: dict[str, tuple[RequestStream, int]] = {}
        self._open_requests: set[str] = set()  # event loop only
        self._idle = asyncio.Event()
        self._idle.set()
        self._loop: asyncio.AbstractEventLoop | None = None
        # The loaded adapters, replaced by the engine thread after each load or unload (one attribute store).
        self._loras: list[LoRARequest] = engine.list_loras()
        self._thread = threading.Thread(target=self._run, name="autoglm-engine", daemon=True)

    # ---- event loop side --------------------------------------------------------------
    def start(self) -> None:
        """Start the engine thread; call from the event loop that will await the outputs."""
        self._loop = asyncio.get_running_loop()
        self._thread.start()

    async def shutdown(self) -> None:
        """Stop the thread after its current step, then the engine; requests still open end with EngineDeadError."""
        with self._wakeup:
            self._stopping = True
            self._wakeup.notify()
        if self._thread.is_alive():
            await asyncio.to_thread(self._thread.join)
        await asyncio.to_thread(self.engine.close)

    @property
    def inputs(self) -> InputProcessor:
        """The engine's checks of a request, for a route to run before it tokenizes or queues anything."""
        return self.engine.inputs

    @property
    def is_running(self) -> bool:
        return self._thread.is_alive() and not self._stopping

    @property
    def num_open_requests(self) -> int:
        return len(self._open_requests)

    @property
    def config(self) -> EngineConfig:
        return self.engine.config

    @property
    def model_path(self) -> Path:
        return self.engine.model_path

    @property
    def tokenizer(self) -> PreTrainedTokenizerBase:
        return self.engine.tokenizer

    @property
    def max_context_len(self) -> int:
        return self.engine.max_context_len

    @property
    def dtype(self) -> torch.dtype:
        return self.engine.dtype

    @property
    def linear_methods(self) -> str:
        """How the projections and the LM head compute (a CPU kernel rounds as PyTorch's matmul does not)."""
        methods = self.engine.linear_methods
        return f"{methods.layers.describe(self.dtype)}; {methods.lm_head.describe(self.dtype)}"

    @property
    def device_type(self) -> str:
        return self.engine.device.type

    @property
    def pooling_model(self) -> PoolingModel | None:
        return self.engine.pooling_model

    def compile_grammar(self, constraint: StructuredOutputsParams) -> None:
        """Compile `constraint` into the engine's grammar cache; blocks, so call it off the event loop."""
        self.engine.compile_grammar(constraint)

    def notify_when_broken(self, listener: Callable[[EngineBrokenError], None]) -> None:
        self.engine.notify_when_broken(listener)

    async def wait_until_idle(self, timeout_s: float) -> bool:
        """Wait until no request is open; False if `timeout_s` passed first."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout_s)
        except asyncio.TimeoutError:
            return False
        return True

    async def encode(self, request_id: str, prompts: list[Prompt], pooling_params: PoolingParams, priority: int = 0,
                     tenant: TenantTag | None = None) -> list[PoolingRequestOutput]:
        """Each prompt's pooled output, in prompt order, once every prompt's is made: the prompts are admitted,
        refused, timed out and aborted together as :meth:`generate`'s are (a pooling request is one output)."""
        outputs: dict[int, PoolingRequestOutput] = {}
        async for index, output in self.generate(request_id, prompts, pooling_params, priority, tenant=tenant):
            outputs[index] = output
        return [outputs[index] for index in range(len(prompts))]

    async def generate(self, request_id: str, prompts: list[Prompt], params: SamplingParams | PoolingParams,
                       priority: int = 0,
                       arrival_time: float | None = None, observe: DeltaObserver | None = None,
                       tenant: TenantTag | None = None,
                       lora_request: LoRARequest | None = None) -> AsyncIterator[IndexedOutput]:
        """Each prompt's outputs in ``params.output_kind``, tagged with the prompt's index, until every
        prompt has finished: under DELTA what it produced since the last one (one step's worth, or
        several merged if the caller was slow to ask), under CUMULATIVE everything so far. The prompts
        are engine requests ``{request_id}-{index}`` (just `request_id` for a single prompt), admitted
        together so that none runs if one is refused.

        `observe` sees every step's output as it arrives, before any merging. `tenant` is whom the
        request is served for, `lora_request` the loaded adapter it runs with (see LLMEngine.add_request).

        Bad input raises InvalidRequestError and a full queue QueueFullError, both at the first iteration.
        Leaving the iteration early (the client went away, the task was cancelled) or running past
        request_timeout_s (RequestTimeoutError) aborts the requests, freeing their blocks at the next step.
        """
        self.inputs.check_request_id(request_id, self._open_requests)
        engine_ids = [request_id] if len(prompts) == 1 else [f"{request_id}-{i}" for i in range(len(prompts))]
        deadline = asyncio.get_running_loop().time() + self.request_timeout_s
        arrival = time.time() if arrival_time is None else arrival_time
        whole = isinstance(params, PoolingParams) or params.output_kind is RequestOutputKind.CUMULATIVE
        stream = RequestStream(observe, cumulative=whole)
        self._open_requests.add(request_id)
        self._idle.clear()
        running = set(range(len(prompts)))  # the engine still knows these: not finished, rejected or failed
        try:
            self._send(_AddRequests(engine_ids, prompts, params, arrival, priority, tenant, stream, lora_request))
            while running:
                for index, output in await self._next_outputs(stream, deadline):
                    if output.finished:
                        running.discard(index)
                    yield index, output
        finally:
            self._open_requests.discard(request_id)
            if not self._open_requests:
                self._idle.set()
            if running:
                self._send(_AbortRequests([engine_ids[index] for index in sorted(running)]))

    async def add_lora(self, lora_request: LoRARequest) -> None:
        """Load an adapter so that requests may name it: its files are read and checked on a worker thread, and
        it is installed between steps. The same name and folder again is a no-op; past max_cpu_loras the least
        recently used idle adapter is unloaded, or LoRACapacityError raised if every one is busy."""
        if any(loaded == lora_request for loaded in self.list_loras()):
            return
        adapter = await asyncio.to_thread(self.engine.read_lora, lora_request)
        await self._run_on_engine_thread(lambda done: _InstallLoRA(adapter, done))

    async def remove_lora(self, lora_name: str) -> None:
        """Unload an adapter: new requests naming it are refused at once (LoRAAdapterNotFoundError), those
        running finish, then it is unloaded and this returns. An unknown name raises LoRAAdapterNotFoundError."""
        await self._run_on_engine_thread(lambda done: _RemoveLoRA(lora_name, done))

    def list_loras(self) -> list[LoRARequest]:
        """The loaded adapters requests may name (not those being unloaded)."""
        return self._loras

    async def _run_on_engine_thread(self, command: Callable[[Callable[[BaseException | None], None]], _Command]) -> None:
        """Send the command ``command`` makes with a callback that ends this wait, and wait for that call."""
        loop = asyncio.get_running_loop()
        finished: asyncio.Future[None] = loop.create_future()

        def settle(error: BaseException | None) -> None:
            if finished.done():
                return
            if error is None:
                finished.set_result(None)
            else:
                finished.set_exception(error)

        def done(error: BaseException | None) -> None:  # on the engine thread
            try:
                loop.call_soon_threadsafe(settle, error)
            except RuntimeError:  # the event loop is closed: nobody waits
                pass

        with self._wakeup:
            if self._dead:
                raise EngineDeadError("the engine loop is not running")
            self._commands.append(command(done))
            self._wakeup.notify()
        await finished

    async def _next_outputs(self, stream: RequestStream, deadline: float) -> list[IndexedOutput]:
        try:
            return await asyncio.wait_for(stream.take(), deadline - asyncio.get_running_loop().time())
        except asyncio.TimeoutError:
            raise RequestTimeoutError(
                f"the request did not finish within request_timeout_s={self.request_timeout_s:g} seconds"
            ) from None

    def _send(self, command: _Command) -> None:
        with self._wakeup:
            if not self._dead:
                self._commands.append(command)
                self._wakeup.notify()
                return
        if isinstance(command, _AddRequests):
            command.stream.fail(EngineDeadError("the engine loop is not running"))

    # ---- engine thread side -----------------------------------------------------------
    def _run(self) -> None:
        try:
            while (commands := self._wait_for_work()) is not None:
                for command in commands:
                    self._apply(command)
                if self.engine.has_unfinished_requests():
                    self._step()
                    self.heartbeat.beat()
                self.stats = self.engine.get_stats()
        except Exception:
            logger.exception("the engine loop died; the server now answers 503")
        finally:
            self._fail_everything()

    def _wait_for_work(self) -> list[_Command] | None:
        """The commands sent since the last call, sleeping while there is nothing to do; None to stop.

        Before it sleeps, the memory the steps freed goes back to the system (see host_allocator),
        outside the lock so that no sender waits for it.
        """
        if self._has_no_work():
            release_free_memory()
        with self._wakeup:
            if self._has_no_work():
                self.heartbeat.sleeping()
            while self._has_no_work():
                self._wakeup.wait()
            self.heartbeat.woke()
            if self._broken is not None:
                raise self._broken
            if self._stopping:
                return None
            commands = list(self._commands)
            self._commands.clear()
            return commands

    def _has_no_work(self) -> bool:
        return not (self._stopping or self._broken or self._commands or self.engine.has_work_to_step())

    def _mask_ready(self) -> None:
        """From a mask thread: a constrained sequence may run again, wake the engine thread if it sleeps."""
        with self._wakeup:
            self._wakeup.notify()

    def _engine_broken(self, error: EngineBrokenError) -> None:
        """From the thread that noticed: wake the engine thread, which leaves (the server turns unhealthy)."""
        with self._wakeup:
            self._broken = error
            self._wakeup.notify()

    def _apply(self, command: _Command) -> None:
        if isinstance(command, (_InstallLoRA, _RemoveLoRA)):
            self._apply_lora(command)
            return
        if isinstance(command, _AbortRequests):
            for request_id in command.engine_request_ids:
                if self._streams.pop(request_id, None) is not None:
                    self.engine.abort_request(request_id)
            return
        error = self._admit(command)
        if error is None:
            for index, request_id in enumerate(command.engine_request_ids):
                self._streams[request_id] = (command.stream, index)
        else:
            self._deliver([(command.stream, error)])

    def _apply_lora(self, command: _InstallLoRA | _RemoveLoRA) -> None:
        """Load or unload an adapter between steps; an unload's callback waits for its requests to end. The list
        of adapters is replaced before the caller hears, so that it reads its own change."""
        def finished(error: BaseException | None = None) -> None:
            self._loras = self.engine.list_loras()
            command.done(error)

        try:
            if isinstance(command, _InstallLoRA):
                self.engine.install_lora(command.adapter)
                finished()
            else:
                self.engine.remove_lora(command.lora_name, finished)
                self._loras = self.engine.list_loras()  # a draining adapter is listed no more
        except Exception as error:
            finished(error)

    def _admit(self, command: _AddRequests) -> BaseException | None:
        """Hand every prompt to the engine; if one is refused, take back those already added and
        return the error. The queue limit counts requests already waiting, so a batch fits when any room is left."""
        if self.engine.get_stats().num_waiting >= self.max_waiting_requests:
            return QueueFullError(
                f"the server is at its limit of {self.max_waiting_requests} waiting requests; retry later"
            )
        added: list[str] = []
        try:
            for request_id, prompt in zip(command.engine_request_ids, command.prompts, strict=True):
                self.engine.add_request(request_id, prompt, command.params, arrival_time=command.arrival_time,
                                        priority=command.priority, tenant=command.tenant,
                                        lora_request=command.lora_request)
                added.append(request_id)
        except Exception as error:
            for request_id in added:
                self.engine.abort_request(request_id)
            if isinstance(error, InvalidRequestError):
                return error
            logger.exception("adding request %s failed", command.engine_request_ids[len(added)])
            return EngineStepError(f"the engine could not accept the request: {type(error).__name__}: {error}")
        return None

    def _step(self) -> None:
        try:
            outputs = self.engine.step()
        except EngineBrokenError:
            raise  # no later step can succeed: the loop ends
        except RequestsFailedError as error:
            # The engine found the requests that made the step fail and ended them; the others go on.
            logger.exception("engine step failed; ending the requests that caused it: %s", ", ".join(error.request_ids))
            self._end_streams(error.request_ids, EngineStepError(f"the engine failed while generating: {error}"))
            return
        except Exception as error:
            # A half-applied step leaves its requests in an unknown state: end them all, keep serving.
            logger.exception("engine step failed; ending the requests in flight: %s", ", ".join(self._streams))
            message = f"the engine failed while generating: {type(error).__name__}: {error}"
            for request_id in list(self._streams):
                self.engine.abort_request(request_id)
            self._deliver([(stream, EngineStepError(message)) for stream in self._open_streams()])
            self._streams.clear()
            return
        deliveries: list[tuple[RequestStream, StreamItem]] = []
        for output in outputs:
            entry = self._streams.get(output.request_id)
            if entry is not None:
                stream, index = entry
                deliveries.append((stream, (index, output)))
                if output.finished:
                    del self._streams[output.request_id]
        self._deliver(deliveries)

    def _end_streams(self, request_ids: list[str], error: EngineStepError) -> None:
        """Fail the HTTP requests these engine requests belong to; their other prompts are aborted as
        the failed stream's request ends."""
        streams = [entry[0] for request_id in request_ids if (entry := self._streams.pop(request_id, None))]
        self._deliver([(stream, error) for stream in {id(stream): stream for stream in streams}.values()])

    def _open_streams(self) -> list[RequestStream]:
        """Each open HTTP request's stream once, however many prompts it holds."""
        return list({id(stream): stream for stream, _ in self._streams.values()}.values())

    def _fail_everything(self) -> None:
        """The thread is leaving: no request may wait forever for it."""
        with self._wakeup:
            self._dead = True
            pending = [c.stream for c in self._commands if isinstance(c, _AddRequests)]
            waiting_on_adapters = [c.done for c in self._commands if isinstance(c, (_InstallLoRA, _RemoveLoRA))]
            self._commands.clear()
        for done in waiting_on_adapters:
            done(EngineDeadError("the engine loop stopped before the adapter was loaded or unloaded"))
        message = "the engine loop stopped before the request finished"
        self._deliver([(stream, EngineDeadError(message)) for stream in [*self._open_streams(), *pending]])
        self._streams.clear()

    def _deliver(self, deliveries: list[tuple[RequestStream, StreamItem]]) -> None:
        """Hand items to their streams on the event loop, one wake-up for the whole batch."""
        if not deliveries or self._loop is None:
            return
        try:
            self._loop.call_soon_threadsafe(_put_all, deliveries)
        except RuntimeError:  # the event loop is already closed: nobody is waiting any more
            pass


def _put_all(deliveries: list[tuple[RequestStream, StreamItem]]) -> None:
    for stream, item in deliveries:
        if isinstance(item, BaseException):
            stream.fail(item)
        else:
            stream.put(*item)
