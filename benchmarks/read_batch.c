/* A read task's files opened in one call and read in another (benchmarks/png_reads.py). Each
 * call lets go of Python's GIL once (ctypes does), where os.open, os.fstat, os.read and
 * os.close each let go of it and then wait to win it back from the other threads. */

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

/* Each of the ``n`` paths opened: its descriptor into fds[i] and its size into sizes[i], or
 * -errno into fds[i]. */
void open_batch(const char *const *paths, int n, int *fds, long long *sizes)
{
    for (int i = 0; i < n; i++) {
        struct stat info;
        fds[i] = open(paths[i], O_RDONLY | O_CLOEXEC);
        if (fds[i] < 0) {
            fds[i] = -errno;
        } else if (fstat(fds[i], &info) != 0) {
            int error = errno;
            close(fds[i]);
            fds[i] = -error;
        } else {
            sizes[i] = (long long)info.st_size;
        }
    }
}

/* sizes[i] bytes of each file opened (fds[i] >= 0) read into bufs[i], and the file closed:
 * the bytes read into got[i], or -errno. */
void read_batch(const int *fds, int n, char *const *bufs, const long long *sizes, long long *got)
{
    for (int i = 0; i < n; i++) {
        if (fds[i] < 0)
            continue;
        long long done = 0;
        while (done < sizes[i]) {
            ssize_t part = read(fds[i], bufs[i] + done, (size_t)(sizes[i] - done));
            if (part < 0 && errno == EINTR)
                continue;
            if (part <= 0) {
                if (part < 0)
                    done = -errno;
                break;
            }
            done += part;
        }
        got[i] = done;
        close(fds[i]);
    }
}
