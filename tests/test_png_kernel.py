"""png.cu's real kernel, built for the CPU (tests/cuda_host.py) and on the device through CuPy,
launched through edgecli.decode.gpu.png as a decoder launches it, on image data inflated here
by zlib, against cv2.imdecode's frame of the same file. Every output buffer is poisoned first,
twice over, and has a poisoned tail, so an unwritten pixel or a write past the end fails."""

from __future__ import annotations

import struct
import subprocess
import zlib
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
import pytest

from edgecli.decode.gpu import png as gpu_png
from edgecli.decode.png_layout import COLOUR_TYPES, PALETTE, PngLayout, read_layout, row_bytes
from edgecli.output.png import PNG_SIGNATURE
from tests import cuda_host

from .png_corpus import ffmpeg_exe

SAMPLES = Path(__file__).resolve().parent.parent / "sample_frames"
POISONS = (0xA5, 0x5A)  # no pixel equals both, so an unwritten one fails one of the two runs
TAIL = 64  # poisoned bytes after each output buffer
# Every (colour type, bit depth) the PNG specification allows.
LAYOUTS = [(t, d) for t, (_, _, depths) in COLOUR_TYPES.items() for d in depths]
# (height, width): one pixel, one row, one column, and sizes over several strips of 32 rows
# and several periods of 32 units, none a multiple of either.
SIZES = [(1, 1), (1, 9), (9, 1), (2, 2), (7, 3), (33, 17), (1, 255), (255, 1), (70, 45)]
NONE, SUB, UP, AVERAGE, PAETH = range(5)
# How a block's threads take turns in the host build: a kernel that gives one result under all
# of them has no race between its threads.
ORDERS = ["forward", "reverse", 7]


@pytest.fixture(scope="session")
def host_kernel(tmp_path_factory):
    """png.cu's kernel built for the host, kept between sessions beside pytest's temporary
    folders (a skip saying why where there is no C++ compiler)."""
    return cuda_host.for_tests(tmp_path_factory, "png", (gpu_png.KERNEL,))[gpu_png.KERNEL]


@dataclass
class Backend:
    """Where a launch runs: the host build (arrays are NumPy's) or the device (CuPy's)."""

    kernel: object
    xp: object
    order: str | int = "forward"  # the host build's launch order

    def upload(self, array: np.ndarray):
        return self.xp.array(array)  # a copy: the kernel unfilters its data in place

    def download(self, array) -> np.ndarray:
        return array if self.xp is np else self.xp.asnumpy(array)


def make_backend(request, where) -> Backend:
    if where == "device":
        cp = request.getfixturevalue("cp")  # first: it skips where CUDA is unusable
        return Backend(gpu_png.kernel(0), cp)
    return Backend(request.getfixturevalue("host_kernel"), np, where)


@pytest.fixture(params=["forward", pytest.param("device", marks=pytest.mark.gpu)])
def backend(request):
    """The kernel on the CPU or on CUDA device 0 (a skip saying why where CUDA is unusable)."""
    return make_backend(request, request.param)


@pytest.fixture(params=[*ORDERS, pytest.param("device", marks=pytest.mark.gpu)], ids=str)
def ordered_backend(request):
    """The kernel on the CPU, its block's threads taking turns in each order in turn, or on
    CUDA device 0."""
    return make_backend(request, request.param)


# ---- PNG files, made and read here ---------------------------------------------------------


def chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def filter_rows(raw: np.ndarray, bpp: int, filters: list[int]) -> bytes:
    """PNG's filters (specification section 9) applied to raw scanlines (H, row_bytes), row r
    with filters[r]: each row's filter byte, then its filtered bytes."""
    out = []
    previous = np.zeros(raw.shape[1], np.int32)
    for row, kind in zip(raw.astype(np.int32), filters, strict=True):
        a = np.concatenate([np.zeros(bpp, np.int32), row[:-bpp]])[: row.size]
        c = np.concatenate([np.zeros(bpp, np.int32), previous[:-bpp]])[: row.size]
        b = previous
        pa, pb, pc = np.abs(b - c), np.abs(a - c), np.abs(a + b - 2 * c)
        paeth = np.where((pa <= pb) & (pa <= pc), a, np.where(pb <= pc, b, c))
        predicted = [np.zeros_like(row), a, b, (a + b) >> 1, paeth][kind]
        out.append(bytes([kind]) + ((row - predicted) & 0xFF).astype(np.uint8).tobytes())
        previous = row
    return b"".join(out)


def encode(raw: np.ndarray, width: int, color_type: int, depth: int, filters, **chunks) -> bytes:
    """A PNG of raw scanlines (H, row_bytes) with the filter of each row chosen."""
    bpp = max(1, COLOUR_TYPES[color_type][1] * depth // 8)
    inflated = filter_rows(raw, bpp, list(filters))
    return png_file(width, raw.shape[0], color_type, depth, inflated, **chunks)


def png_file(width: int, height: int, color_type: int, depth: int, inflated: bytes, *,
             plte=None, trns=None, idat_parts=1, before=b"", after=b"") -> bytes:  # fmt: skip
    """A PNG of image data ``inflated``, compressed by zlib into ``idat_parts`` IDAT chunks,
    with the chunks ``before`` and ``after`` them."""
    ihdr = struct.pack(">IIBBBBB", width, height, depth, color_type, 0, 0, 0)
    stream = zlib.compress(inflated)
    cuts = np.linspace(0, len(stream), idat_parts + 1).astype(int)
    body = chunk(b"IHDR", ihdr)
    body += chunk(b"PLTE", plte) if plte is not None else b""
    body += chunk(b"tRNS", trns) if trns is not None else b""
    body += before
    body += b"".join(chunk(b"IDAT", stream[a:b]) for a, b in zip(cuts, cuts[1:], strict=False))
    return PNG_SIGNATURE + body + after + chunk(b"IEND", b"")


def exif_chunk(orientation: int, byte_order: str) -> bytes:
    """An eXIf chunk whose one IFD entry is the orientation, in TIFF's ``byte_order`` ("MM"
    or "II")."""
    e = ">" if byte_order == "MM" else "<"
    tiff = byte_order.encode() + struct.pack(f"{e}HIH", 42, 8, 1)
    tiff += struct.pack(f"{e}HHIHH", 0x0112, 3, 1, orientation, 0) + struct.pack(f"{e}I", 0)
    return chunk(b"eXIf", tiff)


@dataclass
class Parsed:
    layout: PngLayout
    inflated: bytes


def parse(data: bytes) -> Parsed:
    """A PNG's layout (edgecli's reading of its chunks) and its image data inflated by zlib."""
    layout = read_layout(data)
    assert not layout.interlaced, "an interlaced PNG"
    return Parsed(layout, zlib.decompress(layout.stream(data)))


def imdecode(data: bytes) -> np.ndarray | None:
    return cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)


# ---- launching ---------------------------------------------------------------------------------


@dataclass
class Decoded:
    frames: np.ndarray  # (N, H, W, 3)
    status: np.ndarray  # (N,)
    unfiltered: list[bytes]  # each image's data after the launch


def decode(backend: Backend, files: list[bytes], *, warps: int = gpu_png.WARPS,
           stride_extra: int = 5) -> Decoded:  # fmt: skip
    """The kernel's frames of PNGs of one layout, in one launch, ``stride_extra`` bytes between
    images' data (so nothing relies on them being packed): the same from each poisoned output
    buffer, nothing written past any buffer's end or into the gaps between images' data."""
    parsed = [parse(f) for f in files]
    first = parsed[0].layout
    n, height, width = len(files), first.height, first.width
    stride = len(parsed[0].inflated) + stride_extra
    spans = [(i * stride, i * stride + len(p.inflated)) for i, p in enumerate(parsed)]
    data_host = np.full(n * stride + TAIL, 0x3C, np.uint8)
    for (start, end), p in zip(spans, parsed, strict=True):
        data_host[start:end] = np.frombuffer(p.inflated, np.uint8)
    palettes = None
    if first.colour_type == PALETTE:
        palettes = backend.upload(np.stack([p.layout.palette_table() for p in parsed]))
    if backend.xp is np:
        backend.kernel.order = backend.order
    frame_bytes = n * height * width * 3
    shape = (n, width, height, 3) if first.orientation >= 5 else (n, height, width, 3)
    results = []
    for poison in POISONS:
        data = backend.upload(data_host)
        out_buffer = backend.upload(np.full(frame_bytes + TAIL, poison, np.uint8))
        out = out_buffer[:frame_bytes].reshape(shape)
        status = backend.upload(np.full(n, -1, np.int32))
        gpu_png.launch_png_to_bgr(
            backend.kernel, data, stride, out, status, color_type=first.colour_type,
            depth=first.bit_depth, palettes=palettes, orientation=first.orientation, warps=warps,
        )  # fmt: skip
        assert (backend.download(out_buffer)[frame_bytes:] == poison).all(), "written past"
        after = backend.download(data)
        outside = after.copy()
        for start, end in spans:
            outside[start:end] = 0x3C
        assert (outside == 0x3C).all(), "written outside the images' data"
        unfiltered = [after[start:end].tobytes() for start, end in spans]
        results.append((backend.download(out), backend.download(status), unfiltered))
    (frames, status, unfiltered), (frames_again, status_again, _) = results
    assert np.array_equal(status, status_again)
    ok = status == 0
    assert np.array_equal(frames[ok], frames_again[ok]), "pixels left unwritten"
    return Decoded(frames, status, unfiltered)


def assert_as_cv2(backend: Backend, files: list[bytes], **options) -> Decoded:
    """Every file decodes, to cv2.imdecode's frame exactly."""
    decoded = decode(backend, files, **options)
    assert decoded.status.tolist() == [0] * len(files)
    for frame, data in zip(decoded.frames, files, strict=True):
        expected = imdecode(data)
        assert expected is not None
        assert np.array_equal(frame, expected)
    return decoded


def raw_rows(rng, height: int, width: int, color_type: int, depth: int) -> np.ndarray:
    """Random scanlines (H, row_bytes), padding bits and palette indices past the palette
    included."""
    return rng.integers(0, 256, (height, row_bytes(width, color_type, depth)), np.uint8)


def palette_chunks(rng, color_type: int, depth: int) -> dict:
    """For a palette image, a PLTE shorter than the indices reach (so some are past its end)
    and a tRNS shorter than the PLTE; nothing for the others."""
    if color_type != PALETTE:
        return {}
    entries = max(1, (1 << depth) * 2 // 3)
    plte = rng.integers(0, 256, 3 * entries, np.uint8).tobytes()
    return {"plte": plte, "trns": rng.integers(0, 256, max(1, entries // 2), np.uint8).tobytes()}


# ---- the tests -----------------------------------------------------------------------------------


@pytest.mark.parametrize("size", SIZES, ids=[f"{h}x{w}" for h, w in SIZES])
@pytest.mark.parametrize("layout", LAYOUTS, ids=[f"type{t}-{d}bit" for t, d in LAYOUTS])
def test_every_layout_as_cv2(ordered_backend, layout, size, rng):
    """Every colour type and bit depth, at every size, with the five filters on successive
    rows, gives cv2's frame, and leaves each row's raw bytes in place of its filtered ones."""
    color_type, depth = layout
    height, width = size
    raw = raw_rows(rng, height, width, color_type, depth)
    filters = [(r + height + width) % 5 for r in range(height)]
    data = encode(raw, width, color_type, depth, filters, **palette_chunks(rng, *layout))
    decoded = assert_as_cv2(ordered_backend, [data])
    kept = np.frombuffer(decoded.unfiltered[0], np.uint8).reshape(height, -1)
    assert kept[:, 0].tolist() == filters
    assert np.array_equal(kept[:, 1:], raw)


BPP_LAYOUTS = [(0, 1), (0, 8), (4, 8), (2, 8), (6, 8), (2, 16), (6, 16)]  # bpp 1, 1, 2, 3, 4, 6, 8


@pytest.mark.parametrize("kind", range(5), ids=["none", "sub", "up", "average", "paeth"])
@pytest.mark.parametrize("layout", BPP_LAYOUTS, ids=[f"type{t}-{d}bit" for t, d in BPP_LAYOUTS])
def test_each_filter_alone(ordered_backend, layout, kind, rng):
    """Each filter on every row, for every filter unit's width, over several strips and
    periods, gives cv2's frame."""
    raw = raw_rows(rng, 70, 45, *layout)
    assert_as_cv2(ordered_backend, [encode(raw, 45, *layout, [kind] * 70)])


@pytest.mark.parametrize("warps", range(1, gpu_png.WARPS + 1))
@pytest.mark.parametrize("layout", [(2, 8), (3, 4), (6, 16)], ids=str)
def test_batch_of_images(ordered_backend, layout, warps, rng):
    """Several images of one layout in one launch, each with a palette of its own, come out
    each as cv2 decodes it, whatever the warps an image (the strips' wavefront)."""
    height, width = 100, 77
    files = []
    for i in range(4):
        filters = rng.integers(0, 5, height).tolist()
        files.append(encode(raw_rows(rng, height, width, *layout), width, *layout, filters,
                            **palette_chunks(rng, *layout), idat_parts=i + 1))  # fmt: skip
    assert_as_cv2(ordered_backend, files, warps=warps)


def photo_crops() -> list[np.ndarray]:
    """Crops of the sample frames, 300 x 200 and odd-sized, from different places."""
    frames = [cv2.imread(str(SAMPLES / f"pan_00{i}.jpg")) for i in (0, 3)]
    return [frames[0][:200, :300], frames[1][37:237, 101:400], frames[0][5:204, 11:312]]


CV2_FILTERS = ["NONE", "SUB", "UP", "AVG", "PAETH"]


def cv2_variants(photo: np.ndarray) -> dict[str, np.ndarray]:
    """The photo as every kind of image cv2.imwrite writes as PNG."""
    wide = photo.astype(np.uint16) * 257 + np.uint16(0x5A)
    gray = cv2.cvtColor(photo, cv2.COLOR_BGR2GRAY)
    return {
        "bgr8": photo,
        "gray8": gray,
        "bgra8": np.dstack([photo, gray]),
        "bgr16": wide,
        "gray16": gray.astype(np.uint16) * 251,
        "bgra16": np.dstack([wide, wide[:, :, 0]]),
    }


@pytest.mark.parametrize(
    "flags",
    [[]]
    + [[cv2.IMWRITE_PNG_FILTER, getattr(cv2, f"IMWRITE_PNG_FILTER_{f}")] for f in CV2_FILTERS]
    + [[cv2.IMWRITE_PNG_STRATEGY, cv2.IMWRITE_PNG_STRATEGY_RLE, cv2.IMWRITE_PNG_COMPRESSION, 9]],
    ids=["default", *CV2_FILTERS, "rle-9"],
)
@pytest.mark.parametrize("kind", ["bgr8", "gray8", "bgra8", "bgr16", "gray16", "bgra16"])
def test_photos_written_by_cv2(backend, kind, flags):
    """Photo crops as libpng writes them through cv2.imwrite (its own choice of filter a row,
    or one filter throughout), as 8- and 16-bit gray, BGR and BGRA, give cv2's frames."""
    files = []
    for photo in photo_crops()[:1] if flags else photo_crops():
        ok, encoded = cv2.imencode(".png", cv2_variants(photo)[kind], flags)
        assert ok
        files.append(encoded.tobytes())
    for data in files:  # the crops differ in size: one launch each
        assert_as_cv2(backend, [data])


@pytest.mark.parametrize("mode", ["P", "1", "L", "LA", "I;16", "RGB", "RGBA", "P-4bit"])
def test_photos_written_by_pillow(backend, mode, tmp_path):
    """Photo crops as Pillow writes them (its own filter choice; palettes of 256 and of 16
    colours, 1-bit, 16-bit gray) give cv2's frames."""
    image = pytest.importorskip("PIL.Image")
    photo = photo_crops()[1]
    rgb = image.fromarray(photo[:, :, ::-1].copy())
    if mode == "P-4bit":
        converted, options = rgb.quantize(16), {"bits": 4}
    elif mode == "P":
        converted, options = rgb.quantize(256), {}
    elif mode == "I;16":
        converted, options = image.fromarray(photo[:, :, 1].astype(np.uint16) * 257), {}
    else:
        converted, options = rgb.convert(mode), {}
    path = tmp_path / "pillow.png"
    converted.save(path, **options)
    data = path.read_bytes()
    if mode == "P-4bit":
        assert read_layout(data).bit_depth == 4
    assert_as_cv2(backend, [data])


FFMPEG_FORMATS = ["rgb24", "rgba", "gray", "ya8", "pal8", "monob", "gray16be", "rgb48be",
                  "rgba64be"]  # fmt: skip


@pytest.mark.parametrize("pred", ["none", "sub", "up", "avg", "paeth", "mixed"])
@pytest.mark.parametrize("pix_fmt", FFMPEG_FORMATS)
def test_frames_written_by_ffmpeg(backend, pix_fmt, pred, tmp_path):
    """A photo crop as ffmpeg's PNG encoder writes it, for each pixel format and prediction it
    offers, gives cv2's frame."""
    source = tmp_path / "crop.png"
    cv2.imwrite(str(source), photo_crops()[2])
    target = tmp_path / "ffmpeg.png"
    subprocess.run(
        [ffmpeg_exe(), "-v", "error", "-i", str(source), "-pix_fmt", pix_fmt, "-pred", pred,
         "-frames:v", "1", str(target)],
        check=True,
    )  # fmt: skip
    assert_as_cv2(backend, [target.read_bytes()])


@pytest.mark.parametrize("bad", [5, 255])
@pytest.mark.parametrize("layout", [(0, 1), (2, 8), (6, 16)], ids=str)
def test_corrupt_filter_byte(backend, layout, bad, rng):
    """An image with a filter byte past 4, which cv2 does not decode, gets the status; the
    others of its batch still decode exactly, and nothing is written outside the buffers."""
    height, width = 70, 40
    files = []
    for _ in range(3):
        filters = rng.integers(0, 5, height).tolist()
        files.append(encode(raw_rows(rng, height, width, *layout), width, *layout, filters))
    parsed = parse(files[1])
    inflated = bytearray(parsed.inflated)
    inflated[45 * (len(inflated) // height)] = bad  # row 45's filter byte
    broken = png_file(width, height, *layout, bytes(inflated))
    assert imdecode(broken) is None
    files[1] = broken
    decoded = decode(backend, files)
    assert decoded.status.tolist() == [0, gpu_png.BAD_FILTER, 0]
    for i in (0, 2):
        assert np.array_equal(decoded.frames[i], imdecode(files[i]))


@pytest.mark.parametrize("byte_order", ["MM", "II"])
@pytest.mark.parametrize("orientation", range(1, 9))
@pytest.mark.parametrize("layout", [(0, 1), (2, 8), (3, 4), (6, 16)], ids=str)
def test_exif_orientation(backend, layout, orientation, byte_order, rng):
    """A PNG whose eXIf chunk (before or after the image data) gives an orientation comes out
    turned as cv2 turns it."""
    height, width = 37, 70
    files = []
    for where in ("before", "after"):
        filters = rng.integers(0, 5, height).tolist()
        bpp = max(1, COLOUR_TYPES[layout[0]][1] * layout[1] // 8)
        inflated = filter_rows(raw_rows(rng, height, width, *layout), bpp, filters)
        exif = {where: exif_chunk(orientation, byte_order)}
        files.append(png_file(width, height, *layout, inflated, **palette_chunks(rng, *layout),
                              **exif))  # fmt: skip
    assert_as_cv2(backend, files)


# Chunks that change no pixel cv2 gives: gamma, significant bits, background, transparency.
ANCILLARY = {
    "gAMA": chunk(b"gAMA", struct.pack(">I", 100000)),
    "sBIT": chunk(b"sBIT", bytes([3, 3, 3])),
    "bKGD": chunk(b"bKGD", struct.pack(">HHH", 255, 0, 255)),
    "tRNS": chunk(b"tRNS", struct.pack(">HHH", 1, 2, 3)),
}


@pytest.mark.parametrize(
    ("layout", "name"),
    [(layout, name) for layout in [(2, 8), (2, 16), (6, 8)] for name in ANCILLARY
     if not (name == "tRNS" and layout[0] == 6)],  # no tRNS beside an alpha channel
)  # fmt: skip
def test_ancillary_chunks_change_nothing(backend, layout, name, rng):
    """An image with a gAMA, sBIT, bKGD or tRNS chunk decodes to cv2's frame, which is the
    frame without it."""
    raw = raw_rows(rng, 33, 40, *layout)
    filters = rng.integers(0, 5, 33).tolist()
    inflated = filter_rows(raw, COLOUR_TYPES[layout[0]][1] * layout[1] // 8, filters)
    plain = png_file(40, 33, *layout, inflated)
    data = png_file(40, 33, *layout, inflated, before=ANCILLARY[name])
    decoded = assert_as_cv2(backend, [data])
    assert np.array_equal(decoded.frames[0], imdecode(plain))


def launch_args(**changes) -> dict:
    """A valid launch's arguments (a 2 x 3 RGB image), with ``changes``."""
    args = {
        "function": lambda *a, **k: None,
        "data": np.zeros(2 * (1 + 9), np.uint8),
        "image_stride": 20,
        "out": np.zeros((1, 2, 3, 3), np.uint8),
        "status": np.zeros(1, np.int32),
        "color_type": 2,
        "depth": 8,
    }
    return args | changes


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"color_type": 5}, "colour type must be one of"),
        ({"depth": 4}, "colour type 2 has bit depths"),
        ({"out": np.zeros((1, 2, 3, 4), np.uint8)}, "out must be contiguous uint8"),
        ({"out": np.zeros((1, 2, 6, 3), np.uint8)[:, :, ::2]}, "out must be contiguous"),
        ({"image_stride": 19}, "image_stride 19 is shorter than an image's 20 bytes"),
        ({"data": np.zeros(19, np.uint8)}, "got uint8 of 19 bytes"),
        ({"status": np.zeros(2, np.int32)}, r"status must be int32 \(1,\)"),
        ({"color_type": 3}, "palette images need palettes"),
        ({"warps": 5}, "warps must be 1 to 4"),
        ({"orientation": 9}, "EXIF orientation must be 1 to 8, got 9"),
        ({"orientation": 6}, "image_stride 20 is shorter than an image's 21 bytes"),
    ],
)
def test_bad_launches_refused(changes, message):
    """A launch whose layout or buffers do not fit together is refused, naming the value,
    before anything runs."""
    with pytest.raises(ValueError, match=message):
        gpu_png.launch_png_to_bgr(**launch_args(**changes))
