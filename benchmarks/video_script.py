"""The script a user would write for videos: multiprocessing.Pool, one reader a video.

    python benchmarks/video_script.py OUT_DIR VIDEO [VIDEO ...]

A process a core; each reads one video with cv2.VideoCapture, and for each frame takes its
gray, 3x3 Sobel in x and y, |Gx| + |Gy|, thresholds it at 100 and writes a 1-bit PNG. With one
video, one process does it all: the frames of a video decode in order. As pool_script.py, its
PNGs hold the edge contract's pixels (l1, replicate border) for thresholds below 255.
"""

import os
import sys
from multiprocessing import Pool

import cv2


def edges(job):
    path, out_dir = job
    stem = os.path.splitext(os.path.basename(path))[0]
    capture = cv2.VideoCapture(path)
    index = 0
    while True:
        ok, frame = capture.read()
        if not ok:
            break
        gray = cv2.cvtColor(frame, cv2.COLOR_BGR2GRAY)
        gx = cv2.Sobel(gray, cv2.CV_16S, 1, 0, ksize=3, borderType=cv2.BORDER_REPLICATE)
        gy = cv2.Sobel(gray, cv2.CV_16S, 0, 1, ksize=3, borderType=cv2.BORDER_REPLICATE)
        magnitude = cv2.add(cv2.convertScaleAbs(gx), cv2.convertScaleAbs(gy))
        _, binary = cv2.threshold(magnitude, 100, 255, cv2.THRESH_BINARY)
        name = os.path.join(out_dir, f"{stem}_{index:06d}.png")
        cv2.imwrite(name, binary, [cv2.IMWRITE_PNG_BILEVEL, 1])
        index += 1
    return index


if __name__ == "__main__":
    out_dir, videos = sys.argv[1], sys.argv[2:]
    os.makedirs(out_dir, exist_ok=True)
    with Pool(processes=min(len(videos), os.cpu_count())) as pool:
        print(sum(pool.imap_unordered(edges, [(v, out_dir) for v in videos])))
