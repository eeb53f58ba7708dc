"""The script a user would write instead of edgecli: multiprocessing.Pool over OpenCV.

    python benchmarks/pool_script.py IN_DIR OUT_DIR [THRESHOLD | LOW,HIGH]

One process a core; each reads a JPEG or PNG, takes its gray, 3x3 Sobel in x and y, |Gx| + |Gy|,
thresholds it and writes a 1-bit PNG; or, given LOW,HIGH, ``cv2.Canny(gray, LOW, HIGH)`` (what
``edgecli run --operator canny -t LOW,HIGH`` computes). ``convertScaleAbs`` saturates |G| at
255, which changes no pixel for thresholds below 255 (a saturated sum is over 255 either way),
so for those the PNGs hold the edge contract's pixels (l1, replicate border) where cvtColor
gives its luma. benchmarks/cpu_vs_script.py times this against ``edgecli run --backend cpu``.
"""

import os
import sys
from multiprocessing import Pool

import cv2


def edge_map(gray, threshold: str):
    """The 0/255 edges of ``gray``: Sobel-threshold at T, or cv2.Canny (l1) at LOW,HIGH."""
    if "," in threshold:
        low, high = (float(t) for t in threshold.split(","))
        return cv2.Canny(gray, low, high)
    gx = cv2.Sobel(gray, cv2.CV_16S, 1, 0, ksize=3, borderType=cv2.BORDER_REPLICATE)
    gy = cv2.Sobel(gray, cv2.CV_16S, 0, 1, ksize=3, borderType=cv2.BORDER_REPLICATE)
    magnitude = cv2.add(cv2.convertScaleAbs(gx), cv2.convertScaleAbs(gy))
    return cv2.threshold(magnitude, int(threshold), 255, cv2.THRESH_BINARY)[1]


def edges(job):
    src, dst, threshold = job
    image = cv2.imread(src, cv2.IMREAD_COLOR)
    binary = edge_map(cv2.cvtColor(image, cv2.COLOR_BGR2GRAY), threshold)
    cv2.imwrite(dst, binary, [cv2.IMWRITE_PNG_BILEVEL, 1])


if __name__ == "__main__":
    in_dir, out_dir = sys.argv[1], sys.argv[2]
    threshold = sys.argv[3] if len(sys.argv) > 3 else "100"
    os.makedirs(out_dir, exist_ok=True)
    names = sorted(n for n in os.listdir(in_dir) if n.lower().endswith((".jpg", ".jpeg", ".png")))
    jobs = [
        (os.path.join(in_dir, n), os.path.join(out_dir, os.path.splitext(n)[0] + ".png"), threshold)
        for n in names
    ]
    with Pool(processes=os.cpu_count()) as pool:
        for _ in pool.imap_unordered(edges, jobs, chunksize=4):
            pass
