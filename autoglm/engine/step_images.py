"""Which images a step encodes, where their rows go, and which encoded images the runner may drop.

The runner keeps each encoded image by its content hash; the engine keeps the same set of keys
here, updated as each plan is built (the runner applies plans in the order they are built), so
that an image shared by several running prompts is encoded once, and dropped only once no
unfinished sequence has placeholders of it left to compute after the step that reads it. The runner
drops once the step's rows are gathered, so an idle engine holds no finished prompt's image. A preempted
sequence whose image was released encodes it again when it computes its prompt again.
"""
from __future__ import annotations

from collections.abc import Iterable

from autoglm.engine.plan_builder import PlannedStep
from autoglm.engine.sequence import Sequence
from autoglm.multimodal import ImageInput
from autoglm.step_plan import ImageRows


class EncodedImages:
    """The keys of the images the runner holds encoded, as the plans built so far leave them."""

    def __init__(self) -> None:
        self.held: set[bytes] = set()
        self._unknown: set[bytes] = set()  # held or not, after a failed step: the next plan drops them

    def forget_all(self) -> None:
        """A step failed, perhaps between encoding and using: have the next plan drop every key the runner may
        hold, so that each image still needed is encoded again."""
        self._unknown |= self.held
        self.held = set()

    def plan(self, planned: PlannedStep, unfinished: Iterable[Sequence]) -> None:
        """Fill ``planned.plan``'s images: rows for every placeholder among its tokens, the images the runner
        does not hold yet (each once, however many rows read it), the keys no sequence needs after this step.
        Nothing to do, and ``unfinished`` left unread, while no image is in play."""
        plan = planned.plan
        if not self.held and not self._unknown and all(seq.vision is None for seq in planned.seqs):
            return
        encode: dict[bytes, ImageInput] = {}
        for seq, first_token, query_len, seq_len in zip(planned.seqs, plan.cu_seqlens_q(), plan.query_lens,
                                                         plan.seq_lens):
            if seq.vision is None:
                continue
            start = seq_len - query_len
            for image, first_row, num_rows in seq.vision.images_within(start, seq_len):
                token_index = first_token + image.offset + first_row - start
                plan.image_rows.append(ImageRows(token_index, image.key, first_row, num_rows))
                if image.key not in self.held:
                    encode.setdefault(image.key, image.input)
        # What any unfinished sequence still has to compute once this step is done: its own rows are gathered
        # by then, so an image whose last placeholder this step computes is released with it, not a step later.
        computed_after = {id(seq): seq_len for seq, seq_len in zip(planned.seqs, plan.seq_lens)}
        needed = {image.key for seq in unfinished if seq.vision is not None for image in seq.vision.images
                  if image.end > computed_after.get(id(seq), seq.num_computed_tokens)}
        released = (self.held | encode.keys() | self._unknown) - needed
        plan.drop_images = sorted(released)
        plan.encode_images = list(encode.values())
        self.held = (self.held | encode.keys()) & needed
        self._unknown = self._unknown - encode.keys() - released
