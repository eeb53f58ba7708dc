"""Frames in and PNGs out, on the CPU backend: every input kind, naming, collisions."""

from __future__ import annotations

import io
import itertools
import os
from pathlib import Path

import cv2
import imageio.v3 as iio
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import edgecli
from edgecli import InputError, OptionError
from edgecli.inputs.sources import discover, discover_inputs
from edgecli.options.params import BORDERS, NORMS
from edgecli.output.resume import MANIFEST_NAME

from .helpers import H264_CLIP, invoke
from .media import photo, write_video
from .oracle import plain_edges


def run_cpu(input_arg, out: Path, **options) -> dict[str, np.ndarray]:
    """Process on the CPU backend; return every output PNG, read back, by relative name."""
    edgecli.process(input_arg, out, backend="cpu", **{"workers": 2, **options})
    return {
        p.relative_to(out).as_posix(): cv2.imread(str(p), cv2.IMREAD_GRAYSCALE)
        for p in sorted(out.rglob("*.png"))
    }


def write_still_images(folder: Path) -> dict[str, np.ndarray]:
    """One file per still-image case; returns the BGR frame the contract says each decodes to."""
    folder.mkdir(parents=True, exist_ok=True)
    bgr = photo(37, 53, seed=3)
    rgba = np.dstack([bgr, np.arange(37 * 53, dtype=np.uint8).reshape(37, 53)])
    wide16 = (photo(29, 41, seed=4).astype(np.uint16) * 257 + 77).astype(np.uint16)
    gray = photo(31, 23, seed=5)[:, :, 1]
    cases = {
        "photo.png": (bgr, bgr),
        "alpha.png": (rgba, bgr),  # alpha dropped
        "deep.png": (wide16, (wide16 >> 8).astype(np.uint8)),  # 16-bit: high byte
        "gray.png": (gray, np.dstack([gray] * 3)),  # gray replicated
        "tiny.png": (bgr[:1, :1], bgr[:1, :1]),
        "row.png": (bgr[:1], bgr[:1]),
        "column.bmp": (bgr[:, :1], bgr[:, :1]),
        "jpeg.jpg": (photo(45, 67, seed=6), None),
        "lossless.webp": (photo(19, 33, seed=7), None),
        "webp_lossy.webp": (photo(21, 35, seed=8), None),
        "still.tiff": (photo(17, 13, seed=9), None),
    }
    expected = {}
    for name, (pixels, decoded) in cases.items():
        params = [cv2.IMWRITE_WEBP_QUALITY, 101] if name == "lossless.webp" else []
        assert cv2.imwrite(str(folder / name), pixels, params)
        read = cv2.imread(str(folder / name), cv2.IMREAD_COLOR)
        if decoded is not None:  # the contract's step 0, checked, not assumed
            np.testing.assert_array_equal(read, decoded, err_msg=name)
        expected[Path(name).stem + ".png"] = read
    return expected


OPTION_GRID = [
    {"norm": n, "border": b, "threshold": t, "png_bits": bits}
    for n, b, t, bits in itertools.product(NORMS, BORDERS, (0, 100, 5000), (1, 8))
]


@pytest.fixture(scope="module")
def still_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("stills")
    return folder, write_still_images(folder)


@pytest.mark.parametrize("options", OPTION_GRID, ids=lambda o: "-".join(str(v) for v in o.values()))
def test_still_images_match_contract(still_folder, tmp_path, options):
    """RGBA, 16-bit, gray, 1x1, 1xN, Nx1, JPEG, WebP, BMP, TIFF: each output equals the
    plain implementation on the decoded frame, for every option combination."""
    folder, decoded = still_folder
    outputs = run_cpu(folder, tmp_path / "out", **options)
    assert sorted(outputs) == sorted(decoded)
    edge_options = {k: options[k] for k in ("threshold", "norm", "border")}
    for name, frame in decoded.items():
        np.testing.assert_array_equal(outputs[name], plain_edges(frame, **edge_options), name)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("border", BORDERS)
def test_h264_video_matches_contract(tmp_path, norm, border):
    """Each frame of an H.264 clip, as VideoCapture decodes it, gives the contract's edges."""
    capture = cv2.VideoCapture(str(H264_CLIP))
    fourcc = int(capture.get(cv2.CAP_PROP_FOURCC)).to_bytes(4, "little").decode().lower()
    frames = []
    while (frame := capture.read())[0]:
        frames.append(frame[1])
    capture.release()
    assert fourcc in ("h264", "avc1") and len(frames) == 24
    outputs = run_cpu(H264_CLIP, tmp_path, norm=norm, border=border, threshold=90)
    assert sorted(outputs) == [f"pan_h264_{i:06d}.png" for i in range(24)]
    for i, frame in enumerate(frames):
        expected = plain_edges(frame, 90, norm, border)
        np.testing.assert_array_equal(outputs[f"pan_h264_{i:06d}.png"], expected)


def test_video_written_by_opencv(tmp_path):
    """An MJPG .avi: one PNG per frame, named <stem>_<6-digit index>.png."""
    frames = [photo(24, 40, seed=i) for i in range(5)]
    decoded = write_video(tmp_path / "clip.avi", frames)
    outputs = run_cpu(tmp_path / "clip.avi", tmp_path / "out")
    assert list(outputs) == [f"clip_{i:06d}.png" for i in range(5)]
    for i, frame in enumerate(decoded):
        expected = plain_edges(frame, 100, "l1", "replicate")
        np.testing.assert_array_equal(outputs[f"clip_{i:06d}.png"], expected)


@pytest.mark.parametrize("kind", ["gif", "apng", "webp", "tiff"])
def test_multi_frame_images(tmp_path, kind):
    """Animated GIF/PNG/WebP and multi-page TIFF give one PNG per frame."""
    frames_rgb = [photo(20, 30, seed=i)[:, :, ::-1] for i in range(3)]
    path = tmp_path / {"gif": "anim.gif", "apng": "anim.png", "webp": "anim.webp"}.get(
        kind, "anim.tiff"
    )
    if kind == "tiff":
        assert cv2.imwritemulti(str(path), [f[:, :, ::-1] for f in frames_rgb])
    elif kind == "webp":
        iio.imwrite(path, np.stack(frames_rgb), lossless=True)
    else:
        iio.imwrite(path, np.stack(frames_rgb), extension=path.suffix, loop=0)
    outputs = run_cpu(path, tmp_path / "out")
    assert list(outputs) == [f"anim_{i:06d}.png" for i in range(3)]
    if kind == "tiff":  # pages as cv2.imread would read each
        decoded = cv2.imreadmulti(str(path), flags=cv2.IMREAD_COLOR)[1]
    else:
        decoded = [np.asarray(f)[:, :, 2::-1] for f in iio.imiter(path)]  # RGB(A) -> BGR
    for i, frame in enumerate(decoded):
        expected = plain_edges(np.ascontiguousarray(frame), 100, "l1", "replicate")
        np.testing.assert_array_equal(outputs[f"anim_{i:06d}.png"], expected)


def test_single_frame_gif_is_a_still_image(tmp_path):
    """A one-frame GIF is named like a still image: <stem>.png."""
    iio.imwrite(tmp_path / "one.gif", photo(10, 12)[:, :, ::-1])
    assert list(run_cpu(tmp_path / "one.gif", tmp_path / "out")) == ["one.png"]


def test_natural_order_and_names(tmp_path):
    """Folders list in natural order ('f2' before 'f10'); a.jpg is written as a.png."""
    for name in ("f10.jpg", "f2.png", "f1.bmp", "notes.txt", ".hidden.png"):
        (tmp_path / name).write_bytes(b"x")
    sources = discover(tmp_path)
    assert [s.out_name for s in sources] == ["f1.png", "f2.png", "f10.png"]


def test_a_folder_lists_its_images_and_links_to_images_only(tmp_path):
    """A folder INPUT's frames: image files, whatever the case of their extension, and links
    that end at a file; not a link to a folder, a broken link, a folder named like an image,
    a hidden file, or what lies in a subfolder."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "real.jpg").write_bytes(b"x")
    folder = tmp_path / "in"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "deep.png").write_bytes(b"x")
    (folder / "dir.png").mkdir()
    for name in ("A.JPG", "b.Png", "c.tiff", ".d.png", "e.png.txt"):
        (folder / name).write_bytes(b"x")
    (folder / "link.jpg").symlink_to(elsewhere / "real.jpg")
    (folder / "chain.jpg").symlink_to("link.jpg")
    (folder / "broken.png").symlink_to(tmp_path / "missing.png")
    (folder / "tofolder.png").symlink_to(elsewhere)
    names = [s.out_name for s in discover(folder)]
    assert names == ["A.png", "b.png", "c.png", "chain.png", "link.png"]
    assert [s.path for s in discover(folder)][0] == folder / "A.JPG"


def test_recursive_keeps_subfolders(tmp_path):
    """--recursive mirrors subfolders into the output; without it they are ignored."""
    (tmp_path / "in" / "sub").mkdir(parents=True)
    cv2.imwrite(str(tmp_path / "in" / "top.png"), photo(8, 9))
    cv2.imwrite(str(tmp_path / "in" / "sub" / "deep.png"), photo(8, 9, seed=1))
    assert list(run_cpu(tmp_path / "in", tmp_path / "flat")) == ["top.png"]
    nested = run_cpu(tmp_path / "in", tmp_path / "tree", recursive=True)
    assert sorted(nested) == ["sub/deep.png", "top.png"]


def test_recursive_scan_skips_the_output_folder(tmp_path):
    """An output folder inside a recursive input is not read as frames, and its files are
    left as they are."""
    folder = tmp_path / "in"
    (folder / "sub").mkdir(parents=True)
    (folder / "edges").mkdir()
    cv2.imwrite(str(folder / "a.jpg"), photo(8, 9))
    cv2.imwrite(str(folder / "sub" / "b.jpg"), photo(8, 9, seed=1))
    cv2.imwrite(str(folder / "edges" / "old.png"), photo(8, 9, seed=2))
    before = (folder / "edges" / "old.png").read_bytes()
    outputs = run_cpu(folder, folder / "edges", recursive=True)
    assert sorted(outputs) == ["a.png", "old.png", "sub/b.png"]
    assert (folder / "edges" / "old.png").read_bytes() == before


def test_glob_input(tmp_path):
    """A quoted glob takes only the files it matches."""
    for name in ("a.jpg", "b.jpg", "c.png"):
        cv2.imwrite(str(tmp_path / name), photo(8, 9))
    outputs = run_cpu(str(tmp_path / "*.jpg"), tmp_path / "out")
    assert sorted(outputs) == ["a.png", "b.png"]


@pytest.mark.parametrize(
    "names, message",
    [
        (["a.png", "a.jpg"], "would both write a.png"),
        (["A.png", "a.bmp"], "(?i)would both write a.png"),
        (["clip.avi", "clip_000001.png"], "would both write clip_000001.png"),
    ],
)
def test_name_collisions_are_refused_before_work(tmp_path, names, message):
    """Two inputs that map to one output name stop the run before anything is written."""
    for name in names:
        if name.endswith(".avi"):
            write_video(tmp_path / name, [photo(16, 16)])
        else:
            cv2.imwrite(str(tmp_path / name), photo(8, 9))
    with pytest.raises(OptionError, match=message):
        edgecli.process(str(tmp_path / "*"), tmp_path / "out", backend="cpu")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("hops", [1, 2, 3])
def test_output_cannot_overwrite_a_file_an_input_links_to(tmp_path, hops):
    """An input that is a link (or a chain of links, relative and absolute) to a PNG where
    an output goes: the run is refused before the PNG is touched."""
    out = tmp_path / "out"
    out.mkdir()
    cv2.imwrite(str(out / "a.png"), photo(8, 9))
    before = (out / "a.png").read_bytes()
    (tmp_path / "in").mkdir()
    target = out / "a.png"
    for hop in range(hops - 1):  # links between, alternately relative and absolute
        link = tmp_path / f"hop{hop}.png"
        link.symlink_to(os.path.relpath(target, tmp_path) if hop % 2 else target)
        target = link
    (tmp_path / "in" / "a.png").symlink_to(target)
    with pytest.raises(OptionError, match="a.png: the output of .*a.png would overwrite"):
        edgecli.process(tmp_path / "in", out, backend="cpu")
    assert (out / "a.png").read_bytes() == before


def test_output_cannot_overwrite_input(tmp_path):
    """Writing into the input folder is refused when a PNG input would be overwritten."""
    cv2.imwrite(str(tmp_path / "frame.png"), photo(8, 9))
    before = (tmp_path / "frame.png").read_bytes()
    with pytest.raises(OptionError, match="would overwrite this input"):
        edgecli.process(tmp_path, tmp_path, backend="cpu")
    assert (tmp_path / "frame.png").read_bytes() == before


def test_output_inside_a_recursive_input_never_overwrites_its_images(tmp_path):
    """-o in/sub --recursive, where in/sub holds the user's x.png: the output of in/x.jpg
    would replace it, so the run is refused naming in/sub/x.png, which stays as it was."""
    folder = tmp_path / "in"
    (folder / "sub").mkdir(parents=True)
    cv2.imwrite(str(folder / "x.jpg"), photo(8, 9))
    cv2.imwrite(str(folder / "sub" / "x.png"), photo(8, 9, seed=1))
    before = (folder / "sub" / "x.png").read_bytes()
    message = f"^{folder / 'sub' / 'x.png'}: the output of {folder / 'x.jpg'} would overwrite"
    with pytest.raises(OptionError, match=message):
        edgecli.process(folder, folder / "sub", backend="cpu", recursive=True)
    assert (folder / "sub" / "x.png").read_bytes() == before


def test_rerun_into_an_output_folder_inside_the_input(tmp_path):
    """A second run into edgecli's own output folder inside a recursive input (it holds a
    run's record) rewrites it, the same bytes; without the record its PNGs cannot be told
    from the user's images, and the run is refused rather than overwriting them."""
    folder = tmp_path / "in"
    folder.mkdir()
    cv2.imwrite(str(folder / "a.jpg"), photo(8, 9))
    run_cpu(folder, folder / "edges", recursive=True)
    first = (folder / "edges" / "a.png").read_bytes()
    run_cpu(folder, folder / "edges", recursive=True)
    assert (folder / "edges" / "a.png").read_bytes() == first
    (folder / "edges" / MANIFEST_NAME).unlink()
    with pytest.raises(OptionError, match="edges/a.png: the output of .*a.jpg would overwrite"):
        run_cpu(folder, folder / "edges", recursive=True)


def test_a_frame_name_of_a_multi_frame_input_never_overwrites_another_input(tmp_path):
    """Frame 1 of the animated anim.png is written as anim_000001.png: where that is an input
    (another animated PNG), the run is refused naming it, and it stays as it was."""
    frames_rgb = np.stack([photo(12, 14, seed=i)[:, :, ::-1] for i in range(3)])
    iio.imwrite(tmp_path / "anim.png", frames_rgb, extension=".png", loop=0)
    iio.imwrite(tmp_path / "anim_000001.png", frames_rgb[:2], extension=".png", loop=0)
    before = (tmp_path / "anim_000001.png").read_bytes()
    message = "anim_000001.png: a frame of .*anim.png would overwrite this input"
    with pytest.raises(OptionError, match=message):
        edgecli.process(tmp_path, tmp_path, backend="cpu")
    assert (tmp_path / "anim_000001.png").read_bytes() == before


def test_several_inputs_in_the_order_given(tmp_path):
    """A folder, a video and a glob together: their sources in the order given, and every
    output equal to that of the input run alone."""
    make = {"a": ("a1.png", "a2.png"), "c": ("c1.jpg", "c2.jpg", "skip.png")}
    for folder, names in make.items():
        (tmp_path / folder).mkdir()
        for i, name in enumerate(names):
            cv2.imwrite(str(tmp_path / folder / name), photo(8, 9, seed=i))
    write_video(tmp_path / "b.avi", [photo(16, 16, seed=i) for i in range(2)])
    inputs = [tmp_path / "a", tmp_path / "b.avi", str(tmp_path / "c" / "*.jpg")]
    sources = discover_inputs(inputs)
    assert [s.path.name for s in sources] == ["a1.png", "a2.png", "b.avi", "c1.jpg", "c2.jpg"]
    together = run_cpu(inputs, tmp_path / "out")
    alone = {}
    for i, one in enumerate(inputs):
        alone |= run_cpu(one, tmp_path / f"alone{i}")
    assert list(together) == sorted(alone) == [
        "a1.png", "a2.png", "b_000000.png", "b_000001.png", "c1.png", "c2.png"
    ]  # fmt: skip
    assert all(np.array_equal(together[name], alone[name]) for name in alone)


def test_output_names_stay_unique_across_inputs(tmp_path):
    """Two INPUTs whose files write one output name are refused, naming both, before work."""
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
    cv2.imwrite(str(tmp_path / "a" / "x.jpg"), photo(8, 9))
    cv2.imwrite(str(tmp_path / "b" / "x.png"), photo(8, 9))
    message = f"{tmp_path / 'a' / 'x.jpg'} and {tmp_path / 'b' / 'x.png'} would both write x.png"
    with pytest.raises(OptionError, match=message):
        edgecli.process([tmp_path / "a", tmp_path / "b"], tmp_path / "out", backend="cpu")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "inputs, first",
    [(["d/x.jpg", "d/x.jpg"], "d/x.jpg"), (["d", "d/x.jpg"], "d/x.jpg"),
     (["d/x.jpg", "link.jpg"], "d/x.jpg"), (["d/*.jpg", "d"], "d/x.jpg")],
    ids=str,
)  # fmt: skip
def test_a_file_given_twice_is_refused(tmp_path, monkeypatch, inputs, first):
    """The same file named by two INPUTs (twice, through its folder, through a link, by a
    glob) is refused, naming both, rather than processed twice."""
    monkeypatch.chdir(tmp_path)
    os.mkdir("d")
    cv2.imwrite("d/x.jpg", photo(8, 9))
    os.symlink("d/x.jpg", "link.jpg")
    second = inputs[1] if inputs[1] != "d" else "d/x.jpg"
    message = f"^{first} and {second} are the same file, given twice"
    with pytest.raises(OptionError, match=message):
        edgecli.process(inputs, tmp_path / "out", backend="cpu")


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda p: p / "missing", "missing: no such file or folder"),
        (lambda p: (p / "empty").mkdir() or p / "empty", "empty: no frames in this folder"),
        (lambda p: str(p / "*.jpg"), "no files match the pattern"),
        (lambda p: (p / "a.xyz").write_bytes(b"1") and p / "a.xyz", "unsupported file type"),
    ],
)
def test_inputs_that_name_no_frames(tmp_path, make, message):
    """Missing paths, empty folders, unmatched globs and unknown types are InputErrors."""
    with pytest.raises(InputError, match=message):
        edgecli.process(make(tmp_path), tmp_path / "out", backend="cpu")


@pytest.mark.parametrize(
    "content, reason",
    [
        (b"", "empty file"),
        (b"this is not an image at all", "not a decodable image"),
        (None, "not a decodable image"),  # a truncated PNG
    ],
)
def test_bad_image_names_the_file(tmp_path, content, reason):
    """An undecodable frame raises FrameError naming the file and the reason."""
    if content is None:
        ok, png = cv2.imencode(".png", photo(64, 64))
        content = png.tobytes()[:200]
    (tmp_path / "bad.png").write_bytes(content)
    with pytest.raises(edgecli.FrameError) as caught:
        edgecli.process(tmp_path, tmp_path / "out", backend="cpu")
    assert caught.value.source == str(tmp_path / "bad.png")
    assert reason in caught.value.reason


@pytest.mark.parametrize("workers, batch", [(1, 1), (2, 3), (3, 16)])
def test_output_bytes_do_not_depend_on_workers_or_batch(still_folder, tmp_path, workers, batch):
    """The same input gives byte-identical PNG files for any worker count and batch size."""
    folder, _ = still_folder
    baseline = tmp_path / "base"
    edgecli.process(folder, baseline, backend="cpu", workers=1, batch=1)
    edgecli.process(folder, tmp_path / "out", backend="cpu", workers=workers, batch=batch)
    for png in baseline.glob("*.png"):
        assert (tmp_path / "out" / png.name).read_bytes() == png.read_bytes()


@pytest.mark.parametrize("bits", [1, 8])
def test_png_bit_depth(tmp_path, bits):
    """Outputs are grayscale PNGs of the requested bit depth, with no temporaries left."""
    cv2.imwrite(str(tmp_path / "in.png"), photo(20, 20))
    edgecli.process(tmp_path / "in.png", tmp_path / "out", backend="cpu", png_bits=bits)
    header = (tmp_path / "out" / "in.png").read_bytes()[:26]
    assert header[:8] == b"\x89PNG\r\n\x1a\n" and header[12:16] == b"IHDR"
    assert (header[24], header[25]) == (bits, 0)  # bit depth, colour type 0 (gray)
    assert sorted(os.listdir(tmp_path / "out")) == [MANIFEST_NAME, "in.png"]


def test_exif_orientation_is_applied_like_imread(tmp_path):
    """A JPEG tagged 'rotate 90' is decoded upright, as cv2.imread does, before edges."""
    from PIL import Image

    image = Image.fromarray(photo(20, 30)[:, :, ::-1])
    exif = image.getexif()
    exif[0x0112] = 6  # Orientation: rotate 90 CW
    image.save(tmp_path / "turned.jpg", exif=exif.tobytes())
    upright = cv2.imread(str(tmp_path / "turned.jpg"), cv2.IMREAD_COLOR)
    assert upright.shape == (30, 20, 3)
    outputs = run_cpu(tmp_path / "turned.jpg", tmp_path / "out")
    np.testing.assert_array_equal(
        outputs["turned.png"], plain_edges(upright, 100, "l1", "replicate")
    )


def pil_pixels(source: Path | bytes) -> int | None:
    """Width x height as PIL reads them from the file's header, or None where PIL cannot."""
    from PIL import Image

    try:
        with Image.open(source if isinstance(source, Path) else io.BytesIO(source)) as image:
            return image.size[0] * image.size[1]
    except Exception:
        return None


def test_header_sizes_agree_with_pil(tmp_path):
    """The size a file's header declares (what --max-pixels is held to before decoding) is
    PIL's, given the file or its bytes: baseline, progressive and gray JPEGs, one with a large
    EXIF block (the frame header far into the file), 8- and 16-bit PNGs, a BMP; a JPEG cut
    before its frame header is unknown where PIL cannot tell it either, and a missing file is
    unknown."""
    from PIL import Image

    from edgecli.decode.cpu import declared_pixels

    image = Image.fromarray(photo(37, 53)[:, :, ::-1])
    exif = image.getexif()
    exif[0x010E] = "x" * 60_000  # ImageDescription: 60 KB before the frame header
    files = {
        "baseline.jpg": lambda p: image.save(p),
        "progressive.jpg": lambda p: image.save(p, progressive=True),
        "exif.jpg": lambda p: image.save(p, exif=exif.tobytes()),
        "gray.jpg": lambda p: image.convert("L").save(p),
        "rgb.png": lambda p: image.save(p),
        "deep.png": lambda p: cv2.imwrite(str(p), (photo(37, 53) * 257.0).astype(np.uint16)),
        "image.bmp": lambda p: image.save(p),
    }
    for name, save in files.items():
        save(tmp_path / name)
        assert declared_pixels(tmp_path / name) == pil_pixels(tmp_path / name) == 37 * 53, name
        assert declared_pixels((tmp_path / name).read_bytes()) == 37 * 53, name  # bytes read
    cut = (tmp_path / "exif.jpg").read_bytes()[:30_000]
    (tmp_path / "cut.jpg").write_bytes(cut)
    assert declared_pixels(tmp_path / "cut.jpg") == pil_pixels(tmp_path / "cut.jpg")
    assert declared_pixels(cut) == pil_pixels(cut)
    assert declared_pixels(tmp_path / "missing.jpg") is None


TIFF_PAGES = [photo(40, 60, seed=i) for i in range(5)]


def five_page_tiff(path: Path, *, keep: float = 1.0, bad_page: int | None = None) -> list:
    """A 5-page TIFF written by cv2.imwritemulti, cut to ``keep`` of its bytes, or with the
    strip of ``bad_page`` pointed past the end of the file; returns the pages that decoding
    each one alone (cv2.imreadmulti, start=i, count=1) gives: an array, or None."""
    import struct

    assert cv2.imwritemulti(str(path), TIFF_PAGES)
    data = bytearray(path.read_bytes())
    if bad_page is not None:  # walk the directories to the page's StripOffsets (tag 273)
        offset, page = struct.unpack("<I", data[4:8])[0], 0
        while offset:
            entries = struct.unpack("<H", data[offset : offset + 2])[0]
            for at in range(offset + 2, offset + 2 + 12 * entries, 12):
                tag, _, count, value = struct.unpack("<HHII", data[at : at + 12])
                if page == bad_page and tag == 273:
                    where = [at + 8] if count == 1 else [value + 4 * j for j in range(count)]
                    for position in where:
                        struct.pack_into("<I", data, position, 10**8)
            offset = struct.unpack("<I", data[at + 12 : at + 16])[0]
            page += 1
    path.write_bytes(bytes(data[: int(len(data) * keep)]))
    alone, level = [], cv2.utils.logging.getLogLevel()
    cv2.utils.logging.setLogLevel(cv2.utils.logging.LOG_LEVEL_SILENT)  # libtiff's complaints
    for i in range(len(TIFF_PAGES)):
        ok, mats = cv2.imreadmulti(str(path), i, 1, flags=cv2.IMREAD_COLOR)
        alone.append(mats[0] if ok and mats else None)
    cv2.utils.logging.setLogLevel(level)
    return alone


def first_missing(pages: list) -> int:
    return [page is None for page in pages].index(True)


def test_a_truncated_tiff_fails_naming_the_first_page_it_cannot_read(tmp_path, capfd):
    """A 5-page TIFF cut short: exit 1, one Error line naming the first page that does not
    decode, the pages before it written, and nothing of libtiff's on stderr."""
    alone = five_page_tiff(tmp_path / "scan.tiff", keep=0.7)
    readable = first_missing(alone)
    assert 0 < readable < 5 and all(page is None for page in alone[readable:])
    capfd.readouterr()
    result = invoke("run", tmp_path / "scan.tiff", "-o", tmp_path / "out", "--backend", "cpu")
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: {tmp_path / 'scan.tiff'} [frame {readable}]: ")
    assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.output
    assert "TIFF" not in capfd.readouterr().err  # libtiff's own lines, printed by OpenCV


def test_a_truncated_tiff_under_skip_writes_the_pages_it_can(tmp_path, capfd):
    """Under --on-error skip the readable pages of a cut TIFF are written, each as decoding
    it alone gives it, and the first page that is not is listed as failed (exit 3)."""
    alone = five_page_tiff(tmp_path / "scan.tiff", keep=0.7)
    readable = first_missing(alone)
    capfd.readouterr()
    summary = edgecli.process(
        tmp_path / "scan.tiff", tmp_path / "out", backend="cpu", on_error="skip"
    )
    assert [f["source"] for f in summary.failed] == [f"{tmp_path / 'scan.tiff'} [frame {readable}]"]
    outputs = {
        p.name: cv2.imread(str(p), cv2.IMREAD_GRAYSCALE) for p in (tmp_path / "out").glob("*.png")
    }
    assert sorted(outputs) == [f"scan_{i:06d}.png" for i in range(readable)]
    for i in range(readable):
        expected = plain_edges(alone[i], 100, "l1", "replicate")
        assert np.array_equal(outputs[f"scan_{i:06d}.png"], expected)
    assert "TIFF" not in capfd.readouterr().err


def test_a_tiff_page_that_cannot_be_read_between_good_ones(tmp_path, capfd):
    """A page whose data lies past the end of the file fails alone: under skip the pages
    before and after it are written, and it is listed by its index."""
    alone = five_page_tiff(tmp_path / "scan.tiff", bad_page=2)
    assert [page is None for page in alone] == [False, False, True, False, False]
    capfd.readouterr()
    summary = edgecli.process(
        tmp_path / "scan.tiff", tmp_path / "out", backend="cpu", on_error="skip"
    )
    assert [f["source"] for f in summary.failed] == [f"{tmp_path / 'scan.tiff'} [frame 2]"]
    written = sorted(p.name for p in (tmp_path / "out").glob("*.png"))
    assert written == [f"scan_{i:06d}.png" for i in (0, 1, 3, 4)]
    assert "TIFF" not in capfd.readouterr().err


@pytest.mark.parametrize("kind, keep", [("gif", 0.4), ("gif", 0.6), ("gif", 0.8), ("apng", 0.6)])
def test_a_truncated_animation_names_the_frame_that_is_cut(tmp_path, kind, keep):
    """A GIF/APNG cut short: the frames that decode are written and the failure names the
    first one that does not (not the last one written)."""
    path = tmp_path / ("anim.gif" if kind == "gif" else "anim.png")
    frames_rgb = np.stack([photo(30, 40, seed=i)[:, :, ::-1] for i in range(4)])
    data = iio.imwrite("<bytes>", frames_rgb, extension=path.suffix, loop=0)
    path.write_bytes(data[: int(len(data) * keep)])
    decoded = []
    with pytest.raises((OSError, IndexError)):  # what imageio gives: frames, then an error
        for frame in iio.imiter(path):
            decoded.append(frame)
    summary = edgecli.process(path, tmp_path / "out", backend="cpu", on_error="skip")
    assert [f["source"] for f in summary.failed] == [f"{path} [frame {len(decoded)}]"]
    written = sorted(p.name for p in (tmp_path / "out").glob("*.png"))
    assert written == [f"anim_{i:06d}.png" for i in range(len(decoded))]


# Files whose headers declare their size: a PNG, a baseline and a progressive JPEG.
HEADER_FILES = [
    cv2.imencode(".png", photo(9, 13))[1].tobytes(),
    cv2.imencode(".jpg", photo(9, 13))[1].tobytes(),
    cv2.imencode(".jpg", photo(9, 13), [cv2.IMWRITE_JPEG_PROGRESSIVE, 1])[1].tobytes(),
]


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.data())
def test_a_header_of_any_bytes_declares_a_size_or_none(data):
    """Whatever a file holds (any prefix of a PNG or a JPEG, with bytes changed or not), the
    size its header declares is a number or None, never an exception: it is read before any
    decoder has its say about the file."""
    whole = data.draw(st.sampled_from(HEADER_FILES))
    cut = data.draw(st.integers(0, len(whole)))
    body = bytearray(whole[:cut])
    for _ in range(data.draw(st.integers(0, 3))):
        if body:
            body[data.draw(st.integers(0, len(body) - 1))] = data.draw(st.integers(0, 255))
    from edgecli.decode.cpu import declared_pixels

    pixels = declared_pixels(bytes(body))
    assert pixels is None or isinstance(pixels, int)


def test_a_png_cut_inside_its_header_fails_as_a_file_not_a_traceback(tmp_path):
    """A PNG cut inside its IHDR, in a run whose memory budget reads headers first, is a failed
    file with the decoder's reason; the whole files beside it are written."""
    folder = tmp_path / "in"
    folder.mkdir()
    whole = cv2.imencode(".png", photo(8, 8))[1].tobytes()
    (folder / "a.png").write_bytes(whole)
    (folder / "b.png").write_bytes(whole[:20])
    summary = edgecli.process(folder, tmp_path / "out", backend="cpu", on_error="skip",
                              max_memory=2**30)  # fmt: skip
    assert summary.frames == 1 and [f["source"] for f in summary.failed] == [str(folder / "b.png")]
