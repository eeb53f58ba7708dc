"""GPU decoding (--decode auto|gpu) against the CPU decoders, file for file (needs CUDA, and
the GPU decoders: nvJPEG with JPEG engines, PyNvVideoCodec with the driver's NVDEC).

Every frame a GPU decoder writes lands in a buffer poisoned right before its conversion kernel
is queued, so a pixel the conversion never wrote fails the comparison.
"""

from __future__ import annotations

import shutil
import signal
import struct
import subprocess
import time
from pathlib import Path

import cv2
import numpy as np
import pytest

import edgecli
from edgecli.decode import segments
from edgecli.errors import FrameError
from edgecli.output.resume import MANIFEST_NAME

from .helpers import DATA, H264_CLIP, edgecli_command, same_pixels
from .media import photo

pytestmark = pytest.mark.gpu

# Clips NVDEC and the kernel decode to cv2's frames (scripts/make_test_media.py): odd sizes,
# B-frames, BT.709 and full range, a portrait phone's display matrix, an audio track; HEVC
# and VP9 (open GOPs, hidden frames), and Matroska and WebM, packet by packet.
EXACT_CLIPS = [
    "nvdec_1918x1080.mp4", "nvdec_250x142.mp4", "nvdec_66x18.mp4", "pan_h264.mp4",
    "nvdec_bt709.mp4", "nvdec_full.mp4", "nvdec_bt709_full.mov", "nvdec_1366x768.mp4",
    "nvdec_rotated.mp4", "nvdec_hevc.mp4", "nvdec_vp9.mp4", "nvdec_bframes.mkv",
    "nvdec_hevc.mkv", "nvdec_rot90.mkv", "nvdec_vp9.webm", "nvdec_hevc_cra.mkv",
]  # fmt: skip
# Stream copies of nvdec_250x142.mp4 that cv2 shows otherwise than decoded: cut by an edit list,
# begun without a keyframe.
CPU_CLIPS = ["nvdec_cut.mp4", "nvdec_headless.mp4"]
SAMPLING = {
    "444": cv2.IMWRITE_JPEG_SAMPLING_FACTOR_444,
    "422": cv2.IMWRITE_JPEG_SAMPLING_FACTOR_422,
    "420": cv2.IMWRITE_JPEG_SAMPLING_FACTOR_420,
    "440": cv2.IMWRITE_JPEG_SAMPLING_FACTOR_440,
    "411": cv2.IMWRITE_JPEG_SAMPLING_FACTOR_411,
}
SIZES = [(1, 1), (1, 7), (7, 1), (2, 3), (17, 33), (33, 17), (1079, 1917)]


@pytest.fixture(scope="module")
def nvdec(gpu_decode):
    """edgecli.decode.gpu.video, or a skip saying why NVDEC cannot run here."""
    from edgecli.decode import engines

    reason = engines.video_unusable_reason()
    if reason is not None:
        pytest.skip(f"NVDEC unusable: {reason}")
    from edgecli.decode.gpu import video

    return video


@pytest.fixture(autouse=True)
def poisoned_conversions(request, monkeypatch):
    """Poison the frames each conversion kernel writes, on its stream, just before it runs."""
    if "gpu_decode" not in request.fixturenames and "nvdec" not in request.fixturenames:
        return
    from edgecli.decode.gpu import jpeg as gpu_jpeg
    from edgecli.decode.gpu import video as gpu_video

    jpeg, nv12 = gpu_jpeg.launch_jpeg_to_bgr, gpu_video.launch_nv12_to_bgr

    def poisoned_jpeg(device, planes, frame_bytes, out, *args):
        out.data.memset_async(0x5A, out.nbytes, args[-1])
        jpeg(device, planes, frame_bytes, out, *args)

    def poisoned_nv12(device, y, y_pitch, uv, uv_pitch, out, stream, **conversion):
        out.data.memset_async(0xA5, out.nbytes, stream)
        nv12(device, y, y_pitch, uv, uv_pitch, out, stream, **conversion)

    # Where the decoders look them up.
    monkeypatch.setattr(gpu_jpeg, "launch_jpeg_to_bgr", poisoned_jpeg)
    monkeypatch.setattr(gpu_video, "launch_nv12_to_bgr", poisoned_nv12)


def jpeg(image: np.ndarray, sampling: str | None = "420", **flags) -> bytes:
    params = [cv2.IMWRITE_JPEG_QUALITY, 92]
    if sampling is not None:
        params += [cv2.IMWRITE_JPEG_SAMPLING_FACTOR, SAMPLING[sampling]]
    if flags.get("progressive"):
        params += [cv2.IMWRITE_JPEG_PROGRESSIVE, 1]
    ok, data = cv2.imencode(".jpg", image, params)
    assert ok
    return data.tobytes()


def with_orientation(data: bytes, orientation: int) -> bytes:
    """``data`` with an EXIF APP1 segment (little-endian TIFF) holding ``orientation``."""
    ifd = struct.pack("<HHHIHH", 1, 0x0112, 3, 1, orientation, 0) + struct.pack("<I", 0)
    body = b"Exif\x00\x00" + b"II*\x00" + struct.pack("<I", 8) + ifd
    return data[:2] + b"\xff\xe1" + struct.pack(">H", len(body) + 2) + body + data[2:]


def run_both(source, tmp_path: Path, **options):
    """The run with --decode cpu and with --decode auto; their summaries, outputs compared."""
    cpu = edgecli.process(source, tmp_path / "cpu", backend="cuda", decode="cpu", **options)
    auto = edgecli.process(source, tmp_path / "auto", backend="cuda", decode="auto", **options)
    same_pixels(tmp_path / "cpu", tmp_path / "auto")
    assert auto.failed == cpu.failed
    return cpu, auto


@pytest.fixture(scope="module")
def jpeg_folder(tmp_path_factory):
    """Every sampling at odd sizes, gray, EXIF orientations, and the kinds that stay on the
    CPU (progressive, 4:1:1, a PNG), interleaved so batches break on every key."""
    folder = tmp_path_factory.mktemp("jpegs")
    gpu, cpu = 0, 0
    for s, sampling in enumerate(("444", "422", "420", "440")):
        for i, (h, w) in enumerate(SIZES):
            (folder / f"{sampling}_{i}.jpg").write_bytes(jpeg(photo(h, w, seed=s + i), sampling))
            gpu += 1
    for i, (h, w) in enumerate(SIZES):
        gray = cv2.cvtColor(photo(h, w, seed=i), cv2.COLOR_BGR2GRAY)
        (folder / f"gray_{i}.jpg").write_bytes(jpeg(gray, None))
        gpu += 1
    for orientation in range(1, 9):
        data = with_orientation(jpeg(photo(17, 33, seed=orientation)), orientation)
        (folder / f"exif_{orientation}.jpg").write_bytes(data)
        gpu += 1
    (folder / "progressive.jpg").write_bytes(jpeg(photo(40, 60), "420", progressive=True))
    (folder / "s411.jpg").write_bytes(jpeg(photo(40, 64), "411"))
    cv2.imwrite(str(folder / "still.png"), photo(30, 40))
    cpu += 3
    return folder, gpu, cpu


def test_jpegs_decode_on_the_engines_exactly(gpu_decode, jpeg_folder, tmp_path):
    folder, on_gpu, on_cpu = jpeg_folder
    cpu, auto = run_both(folder, tmp_path)
    assert cpu.decoders == {"cpu": on_gpu + on_cpu}
    assert auto.decoders == {"cpu": on_cpu, "nvjpeg-hw": on_gpu}
    assert "gpu_decode" in auto.stages


@pytest.mark.parametrize("count", [1, 31, 32, 33, 70])
def test_batches_of_any_length(gpu_decode, tmp_path, count):
    """Runs of same-size files across the decoder's batch boundaries, then a size change."""
    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(count):
        (folder / f"a{i:03d}.jpg").write_bytes(jpeg(photo(45, 61, seed=i)))
    (folder / "b.jpg").write_bytes(jpeg(photo(46, 61)))
    cpu, auto = run_both(folder, tmp_path, batch=3, streams=2)
    assert auto.decoders == {"nvjpeg-hw": count + 1}


def damaged(tmp_path: Path) -> Path:
    folder = tmp_path / "damaged"
    folder.mkdir()
    whole = jpeg(photo(120, 160))
    (folder / "a_whole.jpg").write_bytes(whole)
    (folder / "b_truncated.jpg").write_bytes(whole[: len(whole) * 6 // 10])
    (folder / "c_garbage.jpg").write_bytes(b"\xff\xd8\xff" + bytes(range(256)) * 8)
    (folder / "d_empty.jpg").write_bytes(b"")
    (folder / "e_whole.jpg").write_bytes(jpeg(photo(120, 160, seed=3)))
    return folder


def test_damaged_jpegs_fail_as_on_the_cpu(gpu_decode, tmp_path):
    folder = damaged(tmp_path)
    cpu, auto = run_both(folder, tmp_path, on_error="skip")
    assert len(auto.failed) == 3 and auto.frames == cpu.frames == 2
    with pytest.raises(FrameError) as on_cpu:
        edgecli.process(folder, tmp_path / "c2", backend="cuda", decode="cpu")
    with pytest.raises(FrameError) as on_gpu:
        edgecli.process(folder, tmp_path / "a2", backend="cuda", decode="auto")
    assert str(on_gpu.value) == str(on_cpu.value)
    assert not list((tmp_path / "a2").glob("*.tmp"))


def test_skip_existing_with_gpu_decoding(gpu_decode, jpeg_folder, tmp_path):
    folder = jpeg_folder[0]
    out = tmp_path / "out"
    edgecli.process(folder, out, backend="cuda", decode="auto")
    removed = sorted(out.glob("4*.png"))[:5]
    for path in removed:
        path.unlink()
    again = edgecli.process(folder, out, backend="cuda", decode="auto", skip_existing=True)
    assert again.frames == len(removed)
    edgecli.process(folder, tmp_path / "cpu", backend="cpu")
    same_pixels(tmp_path / "cpu", out)


@pytest.mark.parametrize("clip", EXACT_CLIPS)
def test_clips_decode_on_nvdec_exactly(nvdec, clip, tmp_path):
    cpu, auto = run_both(DATA / clip, tmp_path)
    assert auto.decoders == {"nvdec": cpu.frames} and auto.videos == {}


@pytest.mark.parametrize("clip", CPU_CLIPS)
def test_clips_nvdec_cannot_match_stay_on_the_cpu(nvdec, clip, tmp_path):
    cpu, auto = run_both(DATA / clip, tmp_path)
    assert auto.decoders == {"cpu": cpu.frames}
    assert list(auto.videos) == [str(DATA / clip)]  # named, with why
    assert auto.videos[str(DATA / clip)].startswith("cpu: ")


@pytest.mark.parametrize("clip", ["nvdec_hevc.mp4", "nvdec_bframes.mkv", "nvdec_vp9.webm"])
@pytest.mark.parametrize("every", [1, 3])
def test_packet_by_packet_keeps_cv2s_frames_under_selections(nvdec, clip, every, tmp_path):
    """A video NVDEC decodes packet by packet gives cv2's frames under --start, --end and
    --every as a whole run does: decoded from the first packet, converted only where kept."""
    options = {"start": "5", "end": "17", "every": every}
    cpu, auto = run_both(DATA / clip, tmp_path, **options)
    assert auto.decoders == {"nvdec": cpu.frames} and cpu.frames == len(range(5, 17, every))


def test_a_truncated_matroska_file_fails_as_on_the_cpu(nvdec, tmp_path):
    """A Matroska file cut short is the CPU's, with the CPU's error and frames."""
    whole = (DATA / "nvdec_bframes.mkv").read_bytes()
    clip = tmp_path / "cut.mkv"
    clip.write_bytes(whole[: len(whole) * 2 // 3])
    cpu, auto = run_both(clip, tmp_path, on_error="skip")
    assert auto.decoders == {"cpu": cpu.frames} and auto.failed == cpu.failed and cpu.failed


def test_ten_bit_and_av1_under_gpu(nvdec, tmp_path):
    """Under --decode gpu, 10-bit HEVC decodes on NVDEC (not cv2's conversion: approximate)
    with cv2's frame count and shape, and AV1 goes to NVDEC only where the driver says this
    GPU decodes it (not Hopper's); elsewhere to cv2, whose FFmpeg may have no AV1 decoder
    either, and then the video fails as a CPU run's does."""
    from edgecli.decode.engines import nvdec_missing

    for clip, frames in (("nvdec_hevc10.mp4", 12), ("nvdec_av1.mp4", 12)):
        out = tmp_path / clip
        codec, depth = ("hevc", 10) if "hevc" in clip else ("av1", 8)
        on_nvdec = nvdec_missing(0, codec, "4:2:0", depth) is None
        if not on_nvdec and not cv2.VideoCapture(str(DATA / clip)).read()[0]:
            with pytest.raises(FrameError, match="no decodable frames"):
                edgecli.process(DATA / clip, out, backend="cuda", decode="gpu")
            continue
        gpu = edgecli.process(DATA / clip, out, backend="cuda", decode="gpu")
        assert gpu.decoders == {("nvdec-approx" if on_nvdec else "cpu"): frames}, clip
        first = cv2.imread(str(out / f"{Path(clip).stem}_000000.png"), cv2.IMREAD_GRAYSCALE)
        assert first.shape == (180, 320)


# The display matrices of a half turn, quarter turns either way and a mirror (a, b, c, d).
TURNS = {"180": (-1, 0, 0, -1), "90": (0, 1, -1, 0), "270": (0, -1, 1, 0), "mirror": (-1, 0, 0, 1)}


@pytest.mark.parametrize("decode", ["auto", "gpu"])
@pytest.mark.parametrize("turn", TURNS)
def test_turned_clips_decode_on_nvdec_turned(nvdec, turn, decode, tmp_path):
    """A clip whose display matrix turns or mirrors its frames decodes on NVDEC, the kernel
    turning each frame as cv2 does (a mirror as a half turn, as cv2 takes it)."""
    data = bytearray((DATA / "nvdec_250x142.mp4").read_bytes())
    matrix = data.index(b"tkhd") + 4 + 40  # a version 0 tkhd's matrix, 16.16 fixed point
    struct.pack_into(">iiiii", data, matrix, TURNS[turn][0] << 16, TURNS[turn][1] << 16, 0,
                     TURNS[turn][2] << 16, TURNS[turn][3] << 16)  # fmt: skip
    clip = tmp_path / "turned.mp4"
    clip.write_bytes(data)
    cpu = edgecli.process(clip, tmp_path / "cpu", backend="cuda", decode="cpu")
    gpu = edgecli.process(clip, tmp_path / "gpu", backend="cuda", decode=decode)
    same_pixels(tmp_path / "cpu", tmp_path / "gpu")
    assert cpu.frames == 90 and gpu.decoders == {"nvdec": 90}
    first = cv2.imread(str(tmp_path / "gpu" / "turned_000000.png"), cv2.IMREAD_GRAYSCALE)
    assert first.shape == ((250, 142) if turn in ("90", "270") else (142, 250))


def test_many_clips_at_once_and_split(nvdec, tmp_path, monkeypatch):
    """All the clips in one folder, with a segment length that splits the longer ones into
    segments decoded side by side (at their keyframes): the CPU's frames."""
    monkeypatch.setattr(segments, "MIN_SEGMENT", 5)
    folder = tmp_path / "clips"
    folder.mkdir()
    for clip in EXACT_CLIPS + CPU_CLIPS:  # named apart: nvdec_hevc.mkv beside nvdec_hevc.mp4
        name = Path(clip)
        shutil.copy(DATA / clip, folder / f"{name.stem}_{name.suffix[1:]}{name.suffix}")
    (folder / "still.jpg").write_bytes(jpeg(photo(50, 70)))
    cpu, auto = run_both(str(folder / "*"), tmp_path, batch=4)  # a glob: videos and the JPEG
    assert auto.decoders["nvdec"] > 0 and auto.decoders["cpu"] > 0
    assert sum(auto.decoders.values()) == cpu.frames


def recorded_seeks(nvdec, monkeypatch) -> list[int]:
    """The frames NVDEC's decoders are told to seek to (``seek_to_index``), from now on."""
    real, seeks = nvdec.import_nvc(), []

    class Decoder:
        def __init__(self, decoder):
            self.decoder = decoder

        def __getattr__(self, name):
            return getattr(self.decoder, name)

        def __len__(self):
            return len(self.decoder)

        def seek_to_index(self, index):
            seeks.append(index)
            return self.decoder.seek_to_index(index)

    class Library:
        def __getattr__(self, name):
            return getattr(real, name)

        def SimpleDecoder(self, *args, **kwargs):  # noqa: N802 - the library's name
            return Decoder(real.SimpleDecoder(*args, **kwargs))

    monkeypatch.setattr(nvdec, "import_nvc", Library)
    return seeks


def test_one_clip_split_into_segments_at_its_keyframes(nvdec, tmp_path, monkeypatch):
    """90 frames with a keyframe every 12, for 4 sessions: the idle sessions cut it, each
    starting at a keyframe; the CPU's frames."""
    monkeypatch.setattr(segments, "MIN_SEGMENT", 7)
    monkeypatch.setattr(nvdec, "VIDEO_SESSIONS", 4)
    seeks = recorded_seeks(nvdec, monkeypatch)
    cpu, auto = run_both(DATA / "nvdec_250x142.mp4", tmp_path)
    assert auto.decoders == {"nvdec": 90}
    assert seeks and set(seeks) <= set(range(12, 90, 12)) and len(set(seeks)) == len(seeks)


def test_the_last_clips_of_a_folder_are_shared_by_idle_sessions(nvdec, tmp_path, monkeypatch):
    """Five copies of a clip with a keyframe every 12 frames, for 2 sessions: once the queue is
    empty, the session that finishes its clip cuts the last clip, still running, at a
    keyframe; the CPU's frames. The last clip's own session holds its first batch until a
    session has sought into that clip (30 s at most), so that it is still running when the
    other session finishes, whichever session finishes first."""
    import threading

    monkeypatch.setattr(segments, "MIN_SEGMENT", 7)
    monkeypatch.setattr(nvdec, "VIDEO_SESSIONS", 2)
    real, seeks, last_clip_cut = nvdec.import_nvc(), [], threading.Event()

    class Decoder:
        """A session's decoder, which knows its clip and whether it has sought into it."""

        def __init__(self, decoder, path):
            self.decoder, self.clip, self.sought = decoder, Path(path).name, False

        def __getattr__(self, name):
            return getattr(self.decoder, name)

        def __len__(self):
            return len(self.decoder)

        def reconfigure_decoder(self, path):
            self.decoder.reconfigure_decoder(path)
            self.clip, self.sought = Path(path).name, False

        def seek_to_index(self, index):
            seeks.append(index)
            self.sought = True
            if self.clip == "c4.mp4":
                last_clip_cut.set()
            return self.decoder.seek_to_index(index)

        def get_batch_frames(self, count):
            if self.clip == "c4.mp4" and not self.sought:  # the last clip, from its start
                last_clip_cut.wait(30)
            return self.decoder.get_batch_frames(count)

    class Library:
        def __getattr__(self, name):
            return getattr(real, name)

        def SimpleDecoder(self, *args, **kwargs):  # noqa: N802 - the library's name
            return Decoder(real.SimpleDecoder(*args, **kwargs), args[0])

    monkeypatch.setattr(nvdec, "import_nvc", Library)
    folder = tmp_path / "clips"
    folder.mkdir()
    for i in range(5):
        shutil.copy(DATA / "nvdec_250x142.mp4", folder / f"c{i}.mp4")
    cpu, auto = run_both(str(folder / "*.mp4"), tmp_path)
    assert auto.decoders == {"nvdec": 450}
    assert last_clip_cut.is_set() and set(seeks) <= set(range(12, 90, 12))


def test_a_clip_with_one_keyframe_is_not_split(nvdec, tmp_path, monkeypatch):
    """Every segment of a clip with no keyframe but its first would decode from frame 0: one
    session decodes it whole."""
    monkeypatch.setattr(segments, "MIN_SEGMENT", 5)
    seeks = recorded_seeks(nvdec, monkeypatch)
    cpu, auto = run_both(H264_CLIP, tmp_path)
    assert auto.decoders == {"nvdec": 24} and seeks == []


def calls_of(nvdec, monkeypatch, name: str) -> list:
    """The (args, kwargs) of each call the NVDEC sessions make of PyNvVideoCodec's ``name`` (a
    maker of decoders), from now on: a list that fills as they make them."""
    real, calls = nvdec.import_nvc(), []

    class Library:
        def __getattr__(self, attribute):
            found = getattr(real, attribute)
            if attribute != name:
                return found

            def recorded(*args, **kwargs):
                calls.append((args, kwargs))
                return found(*args, **kwargs)

            return recorded

    monkeypatch.setattr(nvdec, "import_nvc", Library)
    return calls


@pytest.mark.parametrize("sessions", [1, 2])
def test_a_session_keeps_its_decoder_from_clip_to_clip(nvdec, tmp_path, monkeypatch, sessions):
    """More clips than sessions: a session's decoder is pointed at its next clip, down and up
    in size and past a truncated clip (after which it gets a new one), and gives the CPU's
    frames and failures."""
    monkeypatch.setattr(nvdec, "VIDEO_SESSIONS", sessions)
    opened = calls_of(nvdec, monkeypatch, "SimpleDecoder")
    folder = tmp_path / "clips"
    folder.mkdir()
    cut = (DATA / "nvdec_250x142.mp4").read_bytes()
    order = ["nvdec_1918x1080.mp4", "nvdec_66x18.mp4", None, "nvdec_250x142.mp4",
             "pan_h264.mp4", "nvdec_1918x1080.mp4"]  # fmt: skip
    for i, clip in enumerate(order):
        target = folder / f"{i}_{clip or 'cut.mp4'}"
        target.write_bytes(cut[: len(cut) // 2] if clip is None else (DATA / clip).read_bytes())
    cpu, auto = run_both(str(folder / "*.mp4"), tmp_path, on_error="skip")
    assert sum(auto.decoders.values()) == cpu.frames and auto.decoders["nvdec"] > 0
    assert cpu.failed and all("2_cut.mp4" in failure["source"] for failure in cpu.failed)
    # A decoder a session, another after the truncated clip, and perhaps one tried on it.
    assert sessions <= len(opened) <= sessions + 2 < len(order)
    first_args, _ = opened[0]
    assert Path(first_args[0]).name.startswith(("0_", "1_"))


@pytest.mark.parametrize("sessions", [1, 2])
@pytest.mark.parametrize("selection", [{}, {"end": "17"}])
def test_a_session_keeps_its_packet_decoder_from_clip_to_clip(
    nvdec, tmp_path, monkeypatch, sessions, selection
):
    """Clips fed packet by packet, more than sessions: a session feeds its next clip of the
    same codec and size to the decoder its last one ended in, also where that clip starts at
    an open GOP's CRA picture (whose leading pictures refer to frames before the cut), and
    gives the CPU's frames and failures; one left before its end (--end), cut short or of
    another codec gets a new decoder."""
    monkeypatch.setattr(nvdec, "VIDEO_SESSIONS", sessions)
    made = calls_of(nvdec, monkeypatch, "CreateDecoder")
    folder = tmp_path / "clips"
    folder.mkdir()
    whole = (DATA / "nvdec_hevc.mkv").read_bytes()
    order = ["nvdec_hevc.mkv", "nvdec_hevc_cra.mkv", "nvdec_hevc.mp4", "nvdec_vp9.webm",
             "nvdec_vp9.mp4", None, "nvdec_hevc_cra.mkv", "nvdec_bframes.mkv"]  # fmt: skip
    for i, clip in enumerate(order):
        data = whole[: len(whole) * 2 // 3] if clip is None else (DATA / clip).read_bytes()
        (folder / f"{i}_{clip or 'cut.mkv'}").write_bytes(data)
    cpu, auto = run_both(str(folder / "*"), tmp_path, on_error="skip", **selection)
    assert sum(auto.decoders.values()) == cpu.frames and auto.decoders["nvdec"] > 0
    assert auto.failed == cpu.failed
    if sessions == 1 and not selection:
        # HEVC for the first three, VP9 for the next two, then HEVC and H.264 again (the cut
        # clip is the CPU's: its container says it is short).
        assert len(made) == 4, made


def test_truncated_clip_fails_as_on_the_cpu(nvdec, tmp_path):
    data = (DATA / "nvdec_250x142.mp4").read_bytes()
    clip = tmp_path / "cut.mp4"
    clip.write_bytes(data[: len(data) // 2])
    cpu, auto = run_both(clip, tmp_path, on_error="skip")
    assert auto.failed == cpu.failed


@pytest.mark.parametrize("sig, code, name", [(signal.SIGINT, 130, "SIGINT"),
                                             (signal.SIGTERM, 143, "SIGTERM")])  # fmt: skip
def test_a_signal_mid_run_stops_gpu_decoding_cleanly(gpu_decode, tmp_path, sig, code, name):
    """SIGINT/SIGTERM to `edgecli run --decode gpu` while the engines decode: it stops early
    with its summary and exit 130/143, leaving only whole PNGs, each equal to --decode cpu's."""
    files = tmp_path / "files"
    files.mkdir()
    for i in range(12):
        (files / f"p{i:02d}.jpg").write_bytes(jpeg(photo(1080, 1920, seed=i)))
    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(720):  # links cycling over the 12: a run of seconds with one worker
        (folder / f"f{i:03d}.jpg").symlink_to(files / f"p{i % 12:02d}.jpg")
    out = tmp_path / "out"
    command = [*edgecli_command(), "run", str(folder), "-o", str(out), "--decode", "gpu"]
    process = subprocess.Popen(
        [*command, "--workers", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 120
    while process.poll() is None and time.monotonic() < deadline:
        if out.exists() and len(list(out.glob("*.png"))) >= 24:
            break
        time.sleep(0.01)
    assert process.poll() is None, "the run ended before it could be interrupted"
    process.send_signal(sig)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == code, stderr
    assert f"Error: interrupted by {name}; " in stderr and "; interrupted\n" in stderr
    assert [p.name for p in out.iterdir() if p.suffix != ".png"] in ([], [MANIFEST_NAME])
    written = sorted(p.name for p in out.glob("*.png"))
    assert 24 <= len(written) < 720
    reference = tmp_path / "cpu"
    edgecli.process(files, reference, backend="cpu")
    for name in written:
        source = f"p{int(name[1:4]) % 12:02d}.png"
        assert (out / name).read_bytes() == (reference / source).read_bytes(), name


@pytest.mark.parametrize(
    "selection",
    [{"every": 7}, {"start": "31", "end": "70"}, {"start": "1s", "max_frames": 11, "every": 3}],
)
def test_selected_frames_on_nvdec_are_a_full_runs(nvdec, tmp_path, monkeypatch, selection):
    """--start, --end, --every and --frames through NVDEC (segments too): the frames, names
    and pixels a full CPU-decoded run writes, filtered by index."""
    monkeypatch.setattr(segments, "MIN_SEGMENT", 7)
    clip = DATA / "nvdec_250x142.mp4"
    full = tmp_path / "full"
    edgecli.process(clip, full, backend="cuda", decode="cpu")
    cpu, auto = run_both(clip, tmp_path, **selection)
    assert auto.decoders == {"nvdec": auto.frames} and 0 < auto.frames < 90
    names = sorted(p.name for p in (tmp_path / "auto").glob("*.png"))
    for name in names:
        assert (tmp_path / "auto" / name).read_bytes() == (full / name).read_bytes(), name
