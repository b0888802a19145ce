/* The kernel's floor under a Produce request on this machine: what any broker pays, whatever its language.
 *
 * bench/request_floor.py compiles and drives this (see its docstring for why). Two modes:
 *
 *   request_floor server PORT DIR NFILES
 *       Accept one connection. For each frame (4-byte big-endian size, then that many bytes): read it whole with
 *       recv, append it to file (i % NFILES) of DIR with one write (files opened O_APPEND once, as a broker keeps
 *       its active segments open), answer with a 64-byte frame (4-byte size 60 + 60 bytes: about a Produce v9
 *       response for one partition). Blocking calls, one thread, no epoll: fewer syscalls than any real broker
 *       makes, so the figure is a lower bound. At EOF print "requests user_us sys_us" (getrusage, less what it had
 *       used when the connection came: opening the files is not the requests' cost) and exit.
 *
 *   request_floor client PORT SIZE COUNT INFLIGHT
 *       Send COUNT frames of SIZE bytes (a size prefix + payload) keeping INFLIGHT unanswered, read every answer,
 *       exit 0 when all COUNT answers came back (1 on any short read or bad answer).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

static int read_full(int fd, char *buf, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = recv(fd, buf + got, n - got, 0);
        if (r == 0) return got == 0 ? 0 : -1;
        if (r < 0) { if (errno == EINTR) continue; return -1; }
        got += (size_t)r;
    }
    return 1;
}

static int write_full(int fd, const char *buf, size_t n, int is_sock) {
    size_t put = 0;
    while (put < n) {
        ssize_t r = is_sock ? send(fd, buf + put, n - put, 0) : write(fd, buf + put, n - put);
        if (r < 0) { if (errno == EINTR) continue; return -1; }
        put += (size_t)r;
    }
    return 0;
}

static int server(int port, const char *dir, int nfiles) {
    int *files = calloc((size_t)nfiles, sizeof(int));
    if (!files || nfiles < 1) { fprintf(stderr, "bad NFILES\n"); return 2; }
    char path[4096];
    for (int i = 0; i < nfiles; i++) {
        snprintf(path, sizeof path, "%s/f%05d.log", dir, i);
        files[i] = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (files[i] < 0) { perror("open"); return 2; }
    }
    int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((unsigned short)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(ls, (struct sockaddr *)&a, sizeof a) || listen(ls, 1)) { perror("bind/listen"); return 2; }
    printf("listening\n");
    fflush(stdout);
    int c = accept(ls, NULL, NULL);
    if (c < 0) { perror("accept"); return 2; }
    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    size_t cap = 1 << 20;
    char *buf = malloc(cap);
    if (!buf) { perror("malloc"); return 2; }
    memset(buf, 0, cap);
    struct rusage u0, u;
    getrusage(RUSAGE_SELF, &u0);   /* opening the files and the first touch of the buffer are not the requests' */
    char resp[64] = {0, 0, 0, 60};
    long n = 0;
    for (;;) {
        unsigned char pre[4];
        int r = read_full(c, (char *)pre, 4);
        if (r == 0) break;
        if (r < 0) { perror("recv"); return 2; }
        size_t size = ((size_t)pre[0] << 24) | ((size_t)pre[1] << 16) | ((size_t)pre[2] << 8) | pre[3];
        if (size > cap) {
            char *grown = realloc(buf, size);
            if (!grown) { perror("realloc"); return 2; }
            buf = grown;
            cap = size;
        }
        if (read_full(c, buf, size) != 1) { perror("recv body"); return 2; }
        if (write_full(files[n % nfiles], buf, size, 0)) { perror("write"); return 2; }
        if (write_full(c, resp, sizeof resp, 1)) { perror("send"); return 2; }
        n++;
    }
    getrusage(RUSAGE_SELF, &u);
    printf("%ld %ld %ld\n", n,
           (u.ru_utime.tv_sec - u0.ru_utime.tv_sec) * 1000000L + (u.ru_utime.tv_usec - u0.ru_utime.tv_usec),
           (u.ru_stime.tv_sec - u0.ru_stime.tv_sec) * 1000000L + (u.ru_stime.tv_usec - u0.ru_stime.tv_usec));
    return 0;
}

static int client(int port, size_t size, long count, long inflight) {
    int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((unsigned short)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(s, (struct sockaddr *)&a, sizeof a)) { perror("connect"); return 1; }
    setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    char *req = malloc(size + 4);
    if (!req) { perror("malloc"); return 1; }
    for (size_t i = 0; i < size; i++) req[4 + i] = (char)(i * 131 + 7);
    req[0] = (char)(size >> 24); req[1] = (char)(size >> 16); req[2] = (char)(size >> 8); req[3] = (char)size;
    char resp[64];
    long sent = 0, answered = 0;
    while (answered < count) {
        while (sent < count && sent - answered < inflight) {
            if (write_full(s, req, size + 4, 1)) { perror("send"); return 1; }
            sent++;
        }
        if (read_full(s, resp, sizeof resp) != 1 || resp[3] != 60) { fprintf(stderr, "bad answer\n"); return 1; }
        answered++;
    }
    close(s);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 5 && !strcmp(argv[1], "server")) return server(atoi(argv[2]), argv[3], atoi(argv[4]));
    if (argc == 6 && !strcmp(argv[1], "client"))
        return client(atoi(argv[2]), (size_t)atol(argv[3]), atol(argv[4]), atol(argv[5]));
    fprintf(stderr, "usage: request_floor server PORT DIR NFILES | client PORT SIZE COUNT INFLIGHT\n");
    return 2;
}
