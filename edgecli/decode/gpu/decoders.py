"""The GPU decoders of one run, as :func:`edgecli.decode.plan.plan` chose them."""

from __future__ import annotations

from ..plan import DecodePlan
from .jpeg import JpegDecoder
from .pngs import PNG_THREADS, PngDecoder
from .video import VideoFleet


class GpuDecoders:
    """The GPU decoders of one run: ``jpeg`` (a JpegDecoder, or None), ``png`` (a PngDecoder,
    or None) and ``video`` (whether videos go to a VideoFleet); ``notice``: what --decode auto
    left on the CPU, and why."""

    def __init__(self, chosen: DecodePlan):
        self.device, self.max_pixels = chosen.device, chosen.max_pixels
        backend = chosen.jpeg_backend
        self.jpeg = JpegDecoder(self.device, backend, self.max_pixels) if backend else None
        self.png = PngDecoder(self.device, self.max_pixels) if chosen.png else None
        self.video, self.exact_video = chosen.video, chosen.exact_video
        self.notice = chosen.notice
        # The summary's resources these decoders add, with their lanes (timing.find_bottleneck):
        # the JPEG engines, fed by one thread; the PNG kernels, by their threads; NVDEC, its
        # sessions side by side.
        self.lanes = {"jpeg": 1} if self.jpeg is not None else {}
        if self.png is not None:
            self.lanes["png"] = PNG_THREADS
        self.fleets: list[VideoFleet] = []

    def fleet(self, sources, wanted, skipped, clock) -> VideoFleet:
        fleet = VideoFleet(
            self.device, sources, self.max_pixels, wanted, skipped, clock, self.exact_video
        )
        self.lanes["nvdec"] = max(self.lanes.get("nvdec", 0), fleet.sessions)
        self.fleets.append(fleet)
        return fleet

    def videos(self) -> dict[str, str]:
        """The run's videos NVDEC did not decode exactly, by path: the decoder that had them
        (or the rest of them) and why."""
        return {str(path): note for fleet in self.fleets for path, note in fleet.notes.items()}

    def close(self) -> None:
        for fleet in self.fleets:
            fleet.close()
        for decoder in (self.jpeg, self.png):
            if decoder is not None:
                decoder.close()
