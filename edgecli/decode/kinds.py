"""Which files are read how, by their extension: imported by :mod:`.cpu`, which reads them,
and by the CLI before any decoder is loaded (this module imports nothing)."""

# Read as animations (imageio), whatever their frame count.
ANIMATION_EXTENSIONS = (".gif",)
# Read as videos (cv2.VideoCapture).
VIDEO_EXTENSIONS = (
    ".mp4", ".m4v", ".mov", ".avi", ".mkv", ".webm", ".mpg", ".mpeg", ".ts", ".mts",
    ".m2ts", ".wmv", ".flv", ".3gp", ".ogv", ".y4m",
)  # fmt: skip
IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp")
# What a folder INPUT takes: every file a file INPUT takes, by its extension.
FOLDER_EXTENSIONS = IMAGE_EXTENSIONS + ANIMATION_EXTENSIONS + VIDEO_EXTENSIONS
