// naive_edges.cu: the baseline of benchmarks/kernel.py, not used by edgecli.
//
// The course code's structure with the contract's arithmetic: one thread per output pixel, each
// reading the BGR bytes of its 3x3 neighbourhood straight from global memory (9 pixels, 27
// loads; the caches absorb most of the re-reads), integer luma, replicate border, l1 norm,
// one launch per frame. It computes the same bytes as edgecli's kernel with l1 + replicate.

extern "C" __global__ void naive_edges_l1_replicate(const unsigned char* frame,
                                                   unsigned char* edges, int height, int width,
                                                   int threshold) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= width || y >= height) return;
    int luma[3][3];
    for (int dy = -1; dy <= 1; ++dy) {
        const int yy = min(max(y + dy, 0), height - 1);
        for (int dx = -1; dx <= 1; ++dx) {
            const int xx = min(max(x + dx, 0), width - 1);
            const unsigned char* p = frame + 3 * ((long long)yy * width + xx);
            luma[dy + 1][dx + 1] = (9798 * p[2] + 19235 * p[1] + 3735 * p[0] + 16384) >> 15;
        }
    }
    const int gx = (luma[0][2] + 2 * luma[1][2] + luma[2][2]) - (luma[0][0] + 2 * luma[1][0] + luma[2][0]);
    const int gy = (luma[2][0] + 2 * luma[2][1] + luma[2][2]) - (luma[0][0] + 2 * luma[0][1] + luma[0][2]);
    edges[(long long)y * width + x] = (abs(gx) + abs(gy) > threshold) ? 255 : 0;
}
