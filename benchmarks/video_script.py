"""The script a user would write for videos: multiprocessing.Pool, one reader a video.

    python benchmarks/video_script.py [-t THRESHOLD | -t LOW,HIGH] OUT_DIR VIDEO [VIDEO ...]

A process a core; each reads one video with cv2.VideoCapture, and for each frame takes its
gray and its edges as pool_script.py does (3x3 Sobel, |Gx| + |Gy| above THRESHOLD, 100 unless
given; or cv2.Canny at LOW,HIGH) and writes a 1-bit PNG. With one video, one process does it
all: the frames of a video decode in order. As pool_script.py, its Sobel PNGs hold the edge
contract's pixels (l1, replicate border) for thresholds below 255.
"""

import os
import sys
from multiprocessing import Pool

import cv2
from pool_script import edge_map


def edges(job):
    path, out_dir, threshold = job
    stem = os.path.splitext(os.path.basename(path))[0]
    capture = cv2.VideoCapture(path)
    index = 0
    while True:
        ok, frame = capture.read()
        if not ok:
            break
        binary = edge_map(cv2.cvtColor(frame, cv2.COLOR_BGR2GRAY), threshold)
        name = os.path.join(out_dir, f"{stem}_{index:06d}.png")
        cv2.imwrite(name, binary, [cv2.IMWRITE_PNG_BILEVEL, 1])
        index += 1
    return index


if __name__ == "__main__":
    args = sys.argv[1:]
    threshold = "100"
    if args[:1] == ["-t"]:
        threshold, args = args[1], args[2:]
    out_dir, videos = args[0], args[1:]
    os.makedirs(out_dir, exist_ok=True)
    jobs = [(v, out_dir, threshold) for v in videos]
    with Pool(processes=min(len(videos), os.cpu_count())) as pool:
        print(sum(pool.imap_unordered(edges, jobs)))
