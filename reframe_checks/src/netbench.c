/*
 * netbench: point-to-point and collective network microbenchmark.
 *
 * One program, several modes, in the spirit of NetPIPE (ping-pong sweeps),
 * the Pallas/Intel MPI Benchmarks (Sendrecv, Exchange) and the custom C
 * programs of the source documents (blocking vs non-blocking ping-pong,
 * broadcast).  See reframe_checks/src/README.md for the output format.
 *
 *   pingpong   MPI ping-pong between ranks 0 and 1 (-a: Isend/Irecv)
 *   sendrecv   periodic chain, each rank sends right, receives from left
 *   exchange   periodic chain, each rank exchanges with both neighbours
 *   bcast      MPI_Bcast from rank 0
 *   tcp        raw TCP between ranks 0 and 1; MPI is used only to exchange
 *              the address and to agree on repetition counts, never inside
 *              the timed loops.  Ping-pong by default, -S for a stream over
 *              -c parallel connections.
 *   sweep      every pair of ranks (one per node) in turn: ping-pong latency
 *              and one-way windowed bandwidth in both directions, pairs
 *              scheduled in round-robin rounds; ranks waiting their turn
 *              sleep instead of polling.
 *
 * Repetitions adapt per message size: batches are timed until the median's
 * estimated relative error drops below -r or the per-size budget -t runs
 * out.  Rank 0 decides and broadcasts the decision between batches, so the
 * decision traffic is never timed.
 */
#define _GNU_SOURCE
#include <mpi.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define NETBENCH_VERSION "1.0"
#define MAX_SAMPLES_LIMIT 1000
#define MAX_CONNECTIONS 256

enum mode { PINGPONG, SENDRECV, EXCHANGE, BCAST, TCP, SWEEP };
static const char *mode_names[] = {"pingpong", "sendrecv", "exchange", "bcast", "tcp", "sweep"};

struct options {
    enum mode mode;
    size_t min_bytes, max_bytes;
    double factor;       /* geometric step between message sizes */
    long perturb;        /* NetPIPE-style +/- bytes around each size */
    int nonblocking;     /* pingpong: Isend/Irecv instead of Send/Recv */
    double precision;    /* target relative error of the median */
    double budget;       /* seconds per message size */
    int min_samples, max_samples;
    int verify;
    int one_buffer;      /* send and receive from one buffer (NetPIPE's cache mode) */
    /* tcp */
    int sockbuf;         /* SO_SNDBUF/SO_RCVBUF, 0 = system default */
    int connections;
    int stream;
    int busy_poll;       /* spin on non-blocking reads, as an MPI progress engine does */
    int runs;            /* stream: repeated runs per size */
    size_t stream_bytes; /* stream: bytes per run over all connections */
    const char *tcp_addr;
    /* sweep */
    const char *pair_list;  /* -L "0:1,2:3": measure only these pairs */
    int concurrent;         /* measure a round's pairs at the same time (default) */
    size_t latency_bytes;   /* message size of the latency ping-pong */
    /* explicit sizes (-s) */
    size_t *sizes;
    int nsizes;
};

struct stats {
    double median, min, max, mad;
    double lo, hi;          /* distribution-free ~95 % interval of the median */
    int samples;
    long reps;
};

struct bench {
    struct options *opt;
    MPI_Comm comm;                  /* the ranks measuring: world, or a sweep's pair */
    int rank, size;
    char *sbuf, *rbuf, *sbuf2, *rbuf2;
    int sock;                       /* tcp ping-pong connection */
    int socks[MAX_CONNECTIONS];     /* tcp stream connections */
};

static int world_rank;

static void die(const char *fmt, const char *arg)
{
    fprintf(stderr, "netbench: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
    exit(2);
}

/* Every rank parses the same command line, so a usage error is found by all
 * of them: rank 0 reports it and all leave through MPI_Finalize.  Aborting
 * instead races the launcher's stderr forwarding and can lose the message. */
static void usage_error(const char *fmt, const char *arg)
{
    if (world_rank == 0) {
        fprintf(stderr, "netbench: ");
        fprintf(stderr, fmt, arg);
        fprintf(stderr, "\n");
        fflush(stderr);
    }
    MPI_Finalize();
    exit(2);
}

static void usage(void)
{
    if (world_rank == 0)
        fprintf(stderr,
            "usage: netbench MODE [options]\n"
            "modes: pingpong sendrecv exchange bcast tcp sweep\n"
            "  -n BYTES   smallest message (default 1)\n"
            "  -x BYTES   largest message (default 8388608)\n"
            "  -s LIST    explicit comma-separated message sizes\n"
            "  -f FACTOR  geometric step between sizes (default 2)\n"
            "  -p BYTES   NetPIPE-style perturbation, also measure size-p and size+p\n"
            "  -a         non-blocking ping-pong (Isend/Irecv)\n"
            "  -r REL     target relative error of the median (default 0.01)\n"
            "  -t SEC     time budget per message size (default 0.05)\n"
            "  -m N       minimum samples per size (default 5)\n"
            "  -M N       maximum samples per size (default 50)\n"
            "  -V         verify received data\n"
            "  -1         one buffer per process for sending and receiving, as\n"
            "             NetPIPE's default cache mode (for comparisons with it)\n"
            "tcp mode:\n"
            "  -b BYTES   socket buffer size (SO_SNDBUF/SO_RCVBUF)\n"
            "  -S         stream instead of ping-pong\n"
            "  -P         busy-poll the socket instead of sleeping in recv()\n"
            "  -c N       parallel connections for the stream (default 1)\n"
            "  -R N       stream runs per size (default 5)\n"
            "  -T BYTES   bytes per stream run (default 67108864)\n"
            "  -A ADDR    address of rank 0 to use (default: loopback on one host,\n"
            "             rank 0's host name otherwise)\n"
            "sweep mode (one rank per node; every pair of ranks in round-robin rounds):\n"
            "  -s LIST    bandwidth message sizes (default 1M,8M; -n, -x, -f unused)\n"
            "  -l BYTES   latency ping-pong message size (default 8)\n"
            "  -C         measure a round's pairs concurrently (the default)\n"
            "  -O         measure one pair at a time (each link alone)\n"
            "  -L PAIRS   measure only these pairs of ranks, e.g. 0:1,2:3\n");
}

static size_t parse_size(const char *s, const char *what)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || v < 0)
        usage_error("bad value for %s", what);
    switch (*end) {
    case 'k': case 'K': v *= 1024; end++; break;
    case 'm': case 'M': v *= 1024 * 1024; end++; break;
    case 'g': case 'G': v *= 1024.0 * 1024 * 1024; end++; break;
    }
    if (*end)
        usage_error("bad value for %s", what);
    return (size_t)v;
}

static void parse_size_list(struct options *o, char *list)
{
    int n = 1;
    for (char *p = list; *p; p++)
        n += *p == ',';
    o->sizes = calloc(n, sizeof(size_t));
    o->nsizes = 0;
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ","))
        o->sizes[o->nsizes++] = parse_size(tok, "-s");
}

/* The sweep measures a link's latency and its bandwidth at a few large
 * messages, not a curve: its sizes are -s, 1 MiB and 8 MiB by default. */
static void sweep_defaults(struct options *o)
{
    if (!o->sizes) {
        o->sizes = calloc(2, sizeof(size_t));
        o->sizes[0] = 1 << 20;
        o->sizes[1] = 8 << 20;
        o->nsizes = 2;
    }
    if (o->verify)
        usage_error("%s", "-V is not available in sweep mode");
    if (o->latency_bytes < 1)
        usage_error("%s", "-l must be at least 1 byte");
}

static void parse_options(struct options *o, int argc, char **argv)
{
    *o = (struct options){
        .min_bytes = 1, .max_bytes = 8 << 20, .factor = 2.0,
        .precision = 0.01, .budget = 0.05, .min_samples = 5,
        .max_samples = 50, .connections = 1, .runs = 5,
        .stream_bytes = 64 << 20, .latency_bytes = 8,
        /* a round's pairs at once: N-1 rounds instead of N(N-1)/2 pairs */
        .concurrent = 1,
    };
    if (argc < 2) {
        usage();
        usage_error("%s", "missing MODE");
    }
    int found = 0;
    for (int m = PINGPONG; m <= SWEEP; m++)
        if (!strcmp(argv[1], mode_names[m])) {
            o->mode = m;
            found = 1;
        }
    if (!found) {
        usage();
        usage_error("unknown mode '%s'", argv[1]);
    }
    optind = 2;
    int c;
    while ((c = getopt(argc, argv, "n:x:s:f:p:ar:t:m:M:V1b:SPc:R:T:A:l:COL:h")) != -1) {
        switch (c) {
        case 'n': o->min_bytes = parse_size(optarg, "-n"); break;
        case 'x': o->max_bytes = parse_size(optarg, "-x"); break;
        case 's': parse_size_list(o, optarg); break;
        case 'f': o->factor = atof(optarg); break;
        case 'p': o->perturb = atol(optarg); break;
        case 'a': o->nonblocking = 1; break;
        case 'r': o->precision = atof(optarg); break;
        case 't': o->budget = atof(optarg); break;
        case 'm': o->min_samples = atoi(optarg); break;
        case 'M': o->max_samples = atoi(optarg); break;
        case 'V': o->verify = 1; break;
        case '1': o->one_buffer = 1; break;
        case 'P': o->busy_poll = 1; break;
        case 'b': o->sockbuf = (int)parse_size(optarg, "-b"); break;
        case 'S': o->stream = 1; break;
        case 'c': o->connections = atoi(optarg); break;
        case 'R': o->runs = atoi(optarg); break;
        case 'T': o->stream_bytes = parse_size(optarg, "-T"); break;
        case 'A': o->tcp_addr = optarg; break;
        case 'l': o->latency_bytes = parse_size(optarg, "-l"); break;
        case 'C': o->concurrent = 1; break;
        case 'O': o->concurrent = 0; break;
        case 'L': o->pair_list = optarg; break;
        default: usage(); usage_error("%s", "bad option");
        }
    }
    if (o->factor < 1.05)
        usage_error("%s", "-f must be at least 1.05");
    if (o->min_samples < 1 || o->max_samples < o->min_samples || o->max_samples > MAX_SAMPLES_LIMIT)
        usage_error("%s", "need 1 <= -m <= -M <= 1000");
    if (o->connections < 1 || o->connections > MAX_CONNECTIONS)
        usage_error("%s", "-c must be between 1 and 256");
    if (o->min_bytes > o->max_bytes)
        usage_error("%s", "-n must not exceed -x");
    if (o->runs < 1)
        usage_error("%s", "-R must be at least 1");
    if (o->mode == SWEEP)
        sweep_defaults(o);
}

/* ---- message sizes ------------------------------------------------------ */

static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x > y) - (x < y);
}

/* Geometric sizes from min to max (max always included), each optionally
 * flanked by size-p and size+p as NetPIPE does to expose alignment and
 * protocol-switch effects. */
static size_t *message_sizes(struct options *o, int *count)
{
    if (o->sizes) {
        qsort(o->sizes, o->nsizes, sizeof(size_t), cmp_size);
        *count = o->nsizes;
        return o->sizes;
    }
    int cap = 64, n = 0;
    size_t *s = malloc(cap * 3 * sizeof(size_t));
    double b = o->min_bytes ? (double)o->min_bytes : 1.0;
    size_t last = 0;
    for (;;) {
        size_t base = (size_t)llround(b);
        if (base > o->max_bytes)
            base = o->max_bytes;
        if (base != last || n == 0) {
            if (n + 3 > cap * 3) {
                cap *= 2;
                s = realloc(s, cap * 3 * sizeof(size_t));
            }
            if (o->perturb && base > (size_t)o->perturb)
                s[n++] = base - o->perturb;
            s[n++] = base;
            if (o->perturb && base + o->perturb <= o->max_bytes)
                s[n++] = base + o->perturb;
            last = base;
        }
        if (base >= o->max_bytes)
            break;
        b *= o->factor;
    }
    qsort(s, n, sizeof(size_t), cmp_size);
    int u = 0;
    for (int i = 0; i < n; i++)
        if (u == 0 || s[i] != s[u - 1])
            s[u++] = s[i];
    if (o->min_bytes == 0 && (u == 0 || s[0] != 0)) {
        memmove(s + 1, s, u * sizeof(size_t));
        s[0] = 0;
        u++;
    }
    *count = u;
    return s;
}

/* ---- statistics --------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median_of(double *v, int n)
{
    qsort(v, n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The rank j (1-based) of the order statistics x(j) and x(n+1-j) that
 * bound the median with at least 95 % confidence whatever the samples'
 * distribution: the largest j whose binomial tail P(B(n, 1/2) < j) is at
 * most 2.5 %.  Fewer than 6 samples cannot reach 95 %: their interval is
 * the whole range (93.75 % with 5).  A busy host's delays are not normal,
 * so no normal-theory interval is used. */
static int median_interval_rank(int n)
{
    double term = pow(0.5, n), tail = 0;    /* P(B = k), P(B < j) */
    int j = 1;
    for (int k = 0; k < n / 2; k++) {
        tail += term;                       /* now P(B <= k) = P(B < k + 1) */
        if (tail > 0.025)
            break;
        j = k + 1;
        term = term * (n - k) / (k + 1);
    }
    return j < 1 ? 1 : j;
}

static struct stats summarize(const double *samples, int n, long reps)
{
    double *v = malloc(n * sizeof(double)), *dev = malloc(n * sizeof(double));
    memcpy(v, samples, n * sizeof(double));
    struct stats st = {.samples = n, .reps = reps};
    st.median = median_of(v, n);
    st.min = v[0];
    st.max = v[n - 1];
    int j = median_interval_rank(n);
    st.lo = v[j - 1];
    st.hi = v[n - j];
    for (int i = 0; i < n; i++)
        dev[i] = fabs(v[i] - st.median);
    st.mad = median_of(dev, n);
    free(v);
    free(dev);
    return st;
}

/* Relative standard error of the median, from the MAD (robust to the
 * outliers a shared machine produces). */
static double relative_error(const double *samples, int n, long reps)
{
    if (n < 2)
        return INFINITY;
    struct stats st = summarize(samples, n, reps);
    if (st.median <= 0)
        return INFINITY;
    return 1.4826 * st.mad / st.median / sqrt((double)n);
}

/* ---- data verification -------------------------------------------------- */

static void fill_pattern(char *buf, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        buf[i] = (char)((i * 31u + seed * 7u + 1u) & 0xff);
}

static long count_mismatches(const char *buf, size_t n, unsigned seed)
{
    long bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += buf[i] != (char)((i * 31u + seed * 7u + 1u) & 0xff);
    return bad;
}

/* ---- TCP helpers -------------------------------------------------------- */

static void write_full(int fd, const char *buf, size_t n)
{
    while (n) {
        ssize_t w = send(fd, buf, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            die("tcp send failed: %s", strerror(errno));
        buf += w;
        n -= (size_t)w;
    }
}

static int busy_poll_reads;

static void read_full(int fd, char *buf, size_t n)
{
    while (n) {
        ssize_t r = recv(fd, buf, n, busy_poll_reads ? MSG_DONTWAIT : 0);
        if (r < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
            continue;
        if (r == 0)
            die("%s", "tcp peer closed the connection");
        if (r < 0)
            die("tcp recv failed: %s", strerror(errno));
        buf += r;
        n -= (size_t)r;
    }
}

static void set_socket_options(int fd, int sockbuf, int nodelay)
{
    if (sockbuf > 0) {
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sockbuf, sizeof sockbuf);
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sockbuf, sizeof sockbuf);
    }
    if (nodelay) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
}

/* The address rank 1 should connect to: -A, loopback when both ranks share
 * a host, otherwise the first IPv4 address of rank 0's host name. */
static void server_address(struct bench *b, char *addr, size_t len)
{
    char mine[MPI_MAX_PROCESSOR_NAME], peer[MPI_MAX_PROCESSOR_NAME];
    int n;
    MPI_Get_processor_name(mine, &n);
    memset(peer, 0, sizeof peer);
    if (b->rank == 0)
        MPI_Recv(peer, sizeof peer, MPI_CHAR, 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    else if (b->rank == 1)
        MPI_Send(mine, sizeof mine, MPI_CHAR, 0, 7, MPI_COMM_WORLD);
    if (b->rank != 0)
        return;
    if (b->opt->tcp_addr) {
        snprintf(addr, len, "%s", b->opt->tcp_addr);
    } else if (!strcmp(mine, peer)) {
        snprintf(addr, len, "127.0.0.1");
    } else {
        struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res;
        if (getaddrinfo(mine, NULL, &hints, &res))
            die("cannot resolve host name '%s' (use -A ADDR)", mine);
        inet_ntop(AF_INET, &((struct sockaddr_in *)res->ai_addr)->sin_addr, addr, len);
        freeaddrinfo(res);
    }
}

/* Rank 0 listens, rank 1 opens `n` connections; returns the effective
 * socket buffer size (what the kernel granted, halved as Linux doubles it). */
static int tcp_connect_pair(struct bench *b, int *socks, int n, int nodelay)
{
    char addr[64] = {0};
    int port = 0, granted = 0;
    server_address(b, addr, sizeof addr);
    int lfd = -1;
    if (b->rank == 0) {
        lfd = socket(AF_INET, SOCK_STREAM, 0);
        int one = 1;
        setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        /* buffers set on the listener are inherited, so the window scale
         * negotiated in the handshake matches the requested size */
        set_socket_options(lfd, b->opt->sockbuf, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET};
        if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1)
            die("bad address '%s'", addr);
        if (bind(lfd, (struct sockaddr *)&sa, sizeof sa) || listen(lfd, n + 8))
            die("tcp bind/listen failed: %s", strerror(errno));
        socklen_t sl = sizeof sa;
        getsockname(lfd, (struct sockaddr *)&sa, &sl);
        port = ntohs(sa.sin_port);
    }
    MPI_Bcast(addr, sizeof addr, MPI_CHAR, 0, MPI_COMM_WORLD);
    MPI_Bcast(&port, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (b->rank == 0) {
        for (int i = 0; i < n; i++) {
            socks[i] = accept(lfd, NULL, NULL);
            if (socks[i] < 0)
                die("tcp accept failed: %s", strerror(errno));
            set_socket_options(socks[i], 0, nodelay);
        }
        close(lfd);
    } else if (b->rank == 1) {
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
        inet_pton(AF_INET, addr, &sa.sin_addr);
        for (int i = 0; i < n; i++) {
            socks[i] = socket(AF_INET, SOCK_STREAM, 0);
            set_socket_options(socks[i], b->opt->sockbuf, nodelay);
            if (connect(socks[i], (struct sockaddr *)&sa, sizeof sa))
                die("tcp connect failed: %s", strerror(errno));
        }
    }
    if (b->rank <= 1) {
        socklen_t l = sizeof granted;
        getsockopt(socks[0], SOL_SOCKET, SO_RCVBUF, &granted, &l);
        granted /= 2;
    }
    if (b->rank == 0)
        printf("# tcp_address: %s:%d connections=%d sockbuf_requested=%d sockbuf_granted=%d\n",
               addr, port, n, b->opt->sockbuf, granted);
    return granted;
}

/* ---- timed batches: each returns the wall time of `reps` iterations, as
 * rank 0 sees it (collectives: the slowest rank) ------------------------- */

static double batch_pingpong(struct bench *b, size_t n, long reps)
{
    MPI_Request rq[2];
    MPI_Status st[2];
    double t0 = MPI_Wtime();
    for (long i = 0; i < reps; i++) {
        if (b->rank == 0) {
            if (b->opt->nonblocking) {
                MPI_Irecv(b->rbuf, (int)n, MPI_BYTE, 1, 1, b->comm, &rq[0]);
                MPI_Isend(b->sbuf, (int)n, MPI_BYTE, 1, 0, b->comm, &rq[1]);
                MPI_Waitall(2, rq, st);
            } else {
                MPI_Send(b->sbuf, (int)n, MPI_BYTE, 1, 0, b->comm);
                MPI_Recv(b->rbuf, (int)n, MPI_BYTE, 1, 1, b->comm, MPI_STATUS_IGNORE);
            }
        } else if (b->rank == 1) {
            if (b->opt->nonblocking) {
                MPI_Irecv(b->rbuf, (int)n, MPI_BYTE, 0, 0, b->comm, &rq[0]);
                MPI_Wait(&rq[0], MPI_STATUS_IGNORE);
                MPI_Isend(b->sbuf, (int)n, MPI_BYTE, 0, 1, b->comm, &rq[1]);
                MPI_Wait(&rq[1], MPI_STATUS_IGNORE);
            } else {
                MPI_Recv(b->rbuf, (int)n, MPI_BYTE, 0, 0, b->comm, MPI_STATUS_IGNORE);
                MPI_Send(b->sbuf, (int)n, MPI_BYTE, 0, 1, b->comm);
            }
        }
    }
    return MPI_Wtime() - t0;
}

static double batch_tcp_pingpong(struct bench *b, size_t n, long reps)
{
    double t0 = MPI_Wtime();
    for (long i = 0; i < reps; i++) {
        if (b->rank == 0) {
            write_full(b->sock, b->sbuf, n);
            read_full(b->sock, b->rbuf, n);
        } else if (b->rank == 1) {
            read_full(b->sock, b->rbuf, n);
            write_full(b->sock, b->sbuf, n);
        }
    }
    return MPI_Wtime() - t0;
}

/* Collective batches report the slowest rank, as PMB does. */
static double slowest(double t)
{
    double worst;
    MPI_Reduce(&t, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    return worst;
}

static double batch_sendrecv(struct bench *b, size_t n, long reps)
{
    int right = (b->rank + 1) % b->size, left = (b->rank - 1 + b->size) % b->size;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (long i = 0; i < reps; i++)
        MPI_Sendrecv(b->sbuf, (int)n, MPI_BYTE, right, 0, b->rbuf, (int)n, MPI_BYTE, left, 0,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    return slowest(MPI_Wtime() - t0);
}

static double batch_exchange(struct bench *b, size_t n, long reps)
{
    int right = (b->rank + 1) % b->size, left = (b->rank - 1 + b->size) % b->size;
    MPI_Request rq[4];
    MPI_Status st[4];
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (long i = 0; i < reps; i++) {
        MPI_Irecv(b->rbuf, (int)n, MPI_BYTE, left, 0, MPI_COMM_WORLD, &rq[0]);
        MPI_Irecv(b->rbuf2, (int)n, MPI_BYTE, right, 1, MPI_COMM_WORLD, &rq[1]);
        MPI_Isend(b->sbuf, (int)n, MPI_BYTE, right, 0, MPI_COMM_WORLD, &rq[2]);
        MPI_Isend(b->sbuf2, (int)n, MPI_BYTE, left, 1, MPI_COMM_WORLD, &rq[3]);
        MPI_Waitall(4, rq, st);
    }
    return slowest(MPI_Wtime() - t0);
}

static double batch_bcast(struct bench *b, size_t n, long reps)
{
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (long i = 0; i < reps; i++)
        MPI_Bcast(b->sbuf, (int)n, MPI_BYTE, 0, MPI_COMM_WORLD);
    return slowest(MPI_Wtime() - t0);
}

typedef double (*batch_fn)(struct bench *, size_t, long);

/* ---- verification rounds (untimed) -------------------------------------- */

static long verify_pingpong(struct bench *b, size_t n, int tcp)
{
    long bad = 0;
    if (b->rank == 0) {
        fill_pattern(b->sbuf, n, (unsigned)n);
        if (tcp) {
            write_full(b->sock, b->sbuf, n);
            read_full(b->sock, b->rbuf, n);
        } else {
            MPI_Send(b->sbuf, (int)n, MPI_BYTE, 1, 2, MPI_COMM_WORLD);
            MPI_Recv(b->rbuf, (int)n, MPI_BYTE, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
        bad = count_mismatches(b->rbuf, n, (unsigned)n + 1);
    } else if (b->rank == 1) {
        if (tcp)
            read_full(b->sock, b->rbuf, n);
        else
            MPI_Recv(b->rbuf, (int)n, MPI_BYTE, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        bad = count_mismatches(b->rbuf, n, (unsigned)n);
        fill_pattern(b->sbuf, n, (unsigned)n + 1);
        if (tcp)
            write_full(b->sock, b->sbuf, n);
        else
            MPI_Send(b->sbuf, (int)n, MPI_BYTE, 0, 3, MPI_COMM_WORLD);
    }
    return bad;
}

static long verify_collective(struct bench *b, size_t n)
{
    int right = (b->rank + 1) % b->size, left = (b->rank - 1 + b->size) % b->size;
    long bad = 0;
    switch (b->opt->mode) {
    case SENDRECV:
        fill_pattern(b->sbuf, n, (unsigned)(b->rank + n));
        MPI_Sendrecv(b->sbuf, (int)n, MPI_BYTE, right, 4, b->rbuf, (int)n, MPI_BYTE, left, 4,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        bad = count_mismatches(b->rbuf, n, (unsigned)(left + n));
        break;
    case EXCHANGE:
        fill_pattern(b->sbuf, n, (unsigned)(b->rank + n));
        fill_pattern(b->sbuf2, n, (unsigned)(b->rank + n + 1000));
        MPI_Sendrecv(b->sbuf, (int)n, MPI_BYTE, right, 5, b->rbuf, (int)n, MPI_BYTE, left, 5,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Sendrecv(b->sbuf2, (int)n, MPI_BYTE, left, 6, b->rbuf2, (int)n, MPI_BYTE, right, 6,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        bad = count_mismatches(b->rbuf, n, (unsigned)(left + n)) +
              count_mismatches(b->rbuf2, n, (unsigned)(right + n + 1000));
        break;
    case BCAST:
        if (b->rank == 0)
            fill_pattern(b->sbuf, n, (unsigned)n);
        else
            memset(b->sbuf, 0, n);
        MPI_Bcast(b->sbuf, (int)n, MPI_BYTE, 0, MPI_COMM_WORLD);
        bad = count_mismatches(b->sbuf, n, (unsigned)n);
        break;
    default:
        break;
    }
    return bad;
}

/* ---- the adaptive measurement of one message size ----------------------- */

/* Grow the batch until it lasts about `target` seconds, so timer resolution
 * and loop overhead vanish; the growing batches double as warm-up. */
static long calibrate(struct bench *b, batch_fn fn, size_t n, double target)
{
    long reps = 1;
    for (;;) {
        double t = fn(b, n, reps);
        long next = 0;
        if (b->rank == 0 && t < target / 2 && reps < (1L << 30)) {
            double want = t > 0 ? reps * target / t : reps * 16.0;
            next = (long)fmin(fmax(want, reps + 1.0), reps * 16.0);
        }
        MPI_Bcast(&next, 1, MPI_LONG, 0, b->comm);
        if (!next)
            return reps;
        reps = next;
    }
}

/* Time per iteration of a batch: ping-pong reports half the round trip, as
 * NetPIPE and the seeds do; the other modes the time of one call. */
static double per_iteration(batch_fn fn, double batch_seconds, long reps)
{
    int pingpong = fn == batch_pingpong || fn == batch_tcp_pingpong;
    return batch_seconds / (double)reps / (pingpong ? 2.0 : 1.0);
}

static struct stats measure(struct bench *b, batch_fn fn, size_t n)
{
    struct options *o = b->opt;
    double batch_target = fmax(o->budget / (2.0 * o->min_samples), 1e-4);
    double start = MPI_Wtime();
    long reps = calibrate(b, fn, n, batch_target);
    double samples[MAX_SAMPLES_LIMIT];
    int count = 0, more = 1;
    while (more) {
        double t = fn(b, n, reps);
        if (b->rank == 0) {
            samples[count++] = per_iteration(fn, t, reps);
            int enough = count >= o->min_samples &&
                         (relative_error(samples, count, reps) <= o->precision ||
                          MPI_Wtime() - start >= o->budget);
            more = !(enough || count >= o->max_samples);
        }
        MPI_Bcast(&more, 1, MPI_INT, 0, b->comm);
    }
    struct stats st = {0};
    if (b->rank == 0)
        st = summarize(samples, count, reps);
    return st;
}

/* ---- output ------------------------------------------------------------- */

#define CPU_LIST_MAX 256

/* The CPUs this process may run on, as "0,1" (truncated past the buffer). */
static const char *allowed_cpus(char *buf, size_t size)
{
    cpu_set_t set;
    size_t used = 0;
    buf[0] = 0;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return "?";
    for (int c = 0; c < CPU_SETSIZE && used + 8 < size; c++)
        if (CPU_ISSET(c, &set))
            used += (size_t)snprintf(buf + used, size - used, "%s%d", used ? "," : "", c);
    return buf;
}

static void print_header(struct bench *b)
{
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len, cpu = sched_getcpu();
    char host[MPI_MAX_PROCESSOR_NAME];
    MPI_Get_library_version(lib, &len);
    char *nl = strchr(lib, '\n');
    if (nl)
        *nl = 0;
    MPI_Get_processor_name(host, &len);
    /* each rank's host, CPU and the CPUs it may run on let checks verify
     * the placement: two busy-polling ranks on one CPU cost milliseconds;
     * its PID names the rank when a launcher reports a dead process by
     * PID only (MPICH's hydra) */
    char line[MPI_MAX_PROCESSOR_NAME + 96 + CPU_LIST_MAX];
    char allowed[CPU_LIST_MAX];
    snprintf(line, sizeof line, "# rank %d host %s cpu %d allowed %s pid %ld", b->rank, host,
             cpu, allowed_cpus(allowed, sizeof allowed), (long)getpid());
    char *all = NULL;
    if (b->rank == 0)
        all = calloc((size_t)b->size, sizeof line);
    MPI_Gather(line, sizeof line, MPI_CHAR, all, sizeof line, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (b->rank != 0)
        return;
    struct options *o = b->opt;
    printf("# netbench %s mode=%s%s nprocs=%d\n", NETBENCH_VERSION, mode_names[o->mode],
           o->mode == PINGPONG ? (o->nonblocking ? " variant=nonblocking" : " variant=blocking")
           : o->mode == TCP ? (o->stream ? " variant=stream" : " variant=pingpong")
           : o->mode == SWEEP ? (o->concurrent ? " variant=concurrent" : " variant=sequential")
           : "",
           b->size);
    printf("# mpi_library: %s\n", lib);
    printf("# settings: precision=%g budget_s=%g min_samples=%d max_samples=%d perturb=%ld "
           "verify=%d one_buffer=%d busy_poll=%d\n", o->precision, o->budget, o->min_samples,
           o->max_samples, o->perturb, o->verify, o->one_buffer, o->busy_poll);
    for (int r = 0; r < b->size; r++)
        printf("%s\n", all + (size_t)r * sizeof line);
    free(all);
    fflush(stdout);
}

/* Bandwidth in MB/s (10^6 bytes) of one message of n bytes taking t s.
 * sendrecv and exchange count every byte a rank sends and receives, as PMB. */
static double mbytes_per_s(struct bench *b, size_t n, double t)
{
    double factor = b->opt->mode == SENDRECV ? 2.0 : b->opt->mode == EXCHANGE ? 4.0 : 1.0;
    return t > 0 ? factor * (double)n / t / 1e6 : 0.0;
}

struct point {
    size_t bytes;
    double usec, mbps;
};

/* Size at which bandwidth first reaches half its peak, interpolated
 * log-linearly between the neighbouring sizes (the half-performance length). */
static double half_performance_length(struct point *p, int n, double peak)
{
    for (int i = 0; i < n; i++) {
        if (p[i].mbps >= peak / 2) {
            if (i == 0 || p[i - 1].bytes == 0)
                return (double)p[i].bytes;
            double x0 = log((double)p[i - 1].bytes), x1 = log((double)p[i].bytes);
            double y0 = p[i - 1].mbps, y1 = p[i].mbps;
            double f = y1 > y0 ? (peak / 2 - y0) / (y1 - y0) : 1.0;
            return exp(x0 + f * (x1 - x0));
        }
    }
    return 0;
}

/* Latency: the smallest median time among messages under 64 bytes (seed
 * 000 takes the round trip / 2 of such messages). */
static double latency_of(struct point *p, int n)
{
    double best = INFINITY;
    for (int i = 0; i < n; i++)
        if (p[i].bytes < 64 && p[i].usec < best)
            best = p[i].usec;
    return isfinite(best) ? best : (n ? p[0].usec : 0);
}

static void print_summary(struct point *p, int n, double elapsed)
{
    int ipeak = 0;
    for (int i = 1; i < n; i++)
        if (p[i].mbps > p[ipeak].mbps)
            ipeak = i;
    double peak = n ? p[ipeak].mbps : 0;
    printf("@ latency_usec %.4f\n", latency_of(p, n));
    printf("@ peak_MBps %.3f\n", peak);
    printf("@ peak_Mbps %.3f\n", peak * 8);
    printf("@ peak_bytes %zu\n", n ? p[ipeak].bytes : 0);
    printf("@ nhalf_bytes %.0f\n", half_performance_length(p, n, peak));
    printf("@ sweep_seconds %.3f\n", elapsed);
}

static int run_sweep(struct bench *b, batch_fn fn, int tcp)
{
    int nsizes;
    size_t *sizes = message_sizes(b->opt, &nsizes);
    struct point *pts = calloc((size_t)nsizes, sizeof *pts);
    long bad = 0;
    double start = MPI_Wtime();
    if (b->rank == 0)
        printf("# columns: bytes usec usec_min usec_max mad_pct MBps Mbps samples reps "
               "usec_lo usec_hi\n");
    for (int i = 0; i < nsizes; i++) {
        size_t n = sizes[i];
        if (b->opt->verify)
            bad += tcp || b->opt->mode == PINGPONG ? verify_pingpong(b, n, tcp)
                                                   : verify_collective(b, n);
        struct stats st = measure(b, fn, n);
        if (b->rank != 0)
            continue;
        double mbps = mbytes_per_s(b, n, st.median);
        pts[i] = (struct point){n, st.median * 1e6, mbps};
        printf("%10zu %12.4f %12.4f %12.4f %8.3f %12.3f %12.3f %4d %9ld %12.4f %12.4f\n", n,
               st.median * 1e6, st.min * 1e6, st.max * 1e6,
               st.median > 0 ? 100 * st.mad / st.median : 0, mbps, 8 * mbps, st.samples,
               st.reps, st.lo * 1e6, st.hi * 1e6);
        fflush(stdout);
    }
    long total_bad = 0;
    MPI_Reduce(&bad, &total_bad, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (b->rank == 0) {
        print_summary(pts, nsizes, MPI_Wtime() - start);
        if (b->opt->verify)
            printf("@ verify_errors %ld\n", total_bad);
    }
    free(pts);
    return total_bad ? 3 : 0;
}

/* ---- TCP stream over parallel connections -------------------------------- */

struct stream_job {
    int fd;
    char *buf;
    size_t bufsize, bytes;
    int sender;
    pthread_barrier_t *go;
    struct timespec start, end;
};

static void *stream_worker(void *arg)
{
    struct stream_job *j = arg;
    char ack = 1;
    pthread_barrier_wait(j->go);
    clock_gettime(CLOCK_MONOTONIC, &j->start);
    for (size_t done = 0; done < j->bytes;) {
        size_t chunk = j->bytes - done < j->bufsize ? j->bytes - done : j->bufsize;
        if (j->sender)
            write_full(j->fd, j->buf, chunk);
        else
            read_full(j->fd, j->buf, chunk);
        done += chunk;
    }
    /* the receiver acknowledges the last byte, so the sender's clock stops
     * when the data has arrived, not when it was queued */
    if (j->sender)
        read_full(j->fd, &ack, 1);
    else
        write_full(j->fd, &ack, 1);
    clock_gettime(CLOCK_MONOTONIC, &j->end);
    return NULL;
}

static double seconds_between(struct timespec a, struct timespec b)
{
    return (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
}

/* One run: all connections start together; elapsed time runs from the
 * earliest start to the latest end (seed 003's multi-socket method). */
static double stream_run(struct bench *b, size_t bufsize)
{
    int n = b->opt->connections;
    size_t per_conn = b->opt->stream_bytes / (size_t)n;
    per_conn = per_conn < bufsize ? bufsize : per_conn - per_conn % bufsize;
    struct stream_job jobs[MAX_CONNECTIONS];
    pthread_t th[MAX_CONNECTIONS];
    pthread_barrier_t go;
    if (b->rank > 1) {   /* bystanders only join the start barrier */
        MPI_Barrier(MPI_COMM_WORLD);
        return 0;
    }
    pthread_barrier_init(&go, NULL, (unsigned)n);
    for (int i = 0; i < n; i++) {
        jobs[i] = (struct stream_job){.fd = b->socks[i], .buf = malloc(bufsize), .bufsize = bufsize,
                                      .bytes = per_conn, .sender = b->rank == 1, .go = &go};
        memset(jobs[i].buf, i, bufsize);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < n; i++)
        pthread_create(&th[i], NULL, stream_worker, &jobs[i]);
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    struct timespec first = jobs[0].start, last = jobs[0].end;
    for (int i = 0; i < n; i++) {
        if (seconds_between(jobs[i].start, first) > 0)
            first = jobs[i].start;
        if (seconds_between(last, jobs[i].end) > 0)
            last = jobs[i].end;
        free(jobs[i].buf);
    }
    pthread_barrier_destroy(&go);
    double mbps = (double)per_conn * n / seconds_between(first, last) / 1e6;
    /* the sender (rank 1) holds the accurate clock: send its figure to rank 0 */
    if (b->rank == 1)
        MPI_Send(&mbps, 1, MPI_DOUBLE, 0, 8, MPI_COMM_WORLD);
    else if (b->rank == 0)
        MPI_Recv(&mbps, 1, MPI_DOUBLE, 1, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    return mbps;
}

static int run_stream(struct bench *b)
{
    int nsizes;
    size_t *sizes = message_sizes(b->opt, &nsizes);
    double best = 0, start = MPI_Wtime();
    size_t best_bytes = 0;
    if (b->rank == 0)
        printf("# columns: bytes connections runs MBps MBps_low MBps_high MBps_mean Mbps\n");
    for (int i = 0; i < nsizes; i++) {
        double runs[MAX_SAMPLES_LIMIT], sum = 0;
        int r = b->opt->runs < MAX_SAMPLES_LIMIT ? b->opt->runs : MAX_SAMPLES_LIMIT;
        for (int k = 0; k < r; k++) {
            runs[k] = stream_run(b, sizes[i]);
            sum += runs[k];
        }
        if (b->rank != 0)
            continue;
        struct stats st = summarize(runs, r, 1);
        if (st.median > best) {
            best = st.median;
            best_bytes = sizes[i];
        }
        printf("%10zu %4d %4d %12.3f %12.3f %12.3f %12.3f %12.3f\n", sizes[i],
               b->opt->connections, r, st.median, st.min, st.max, sum / r, 8 * st.median);
        fflush(stdout);
    }
    if (b->rank == 0) {
        printf("@ peak_MBps %.3f\n", best);
        printf("@ peak_Mbps %.3f\n", best * 8);
        printf("@ peak_bytes %zu\n", best_bytes);
        printf("@ sweep_seconds %.3f\n", MPI_Wtime() - start);
    }
    return 0;
}

/* ---- sweep: every pair of ranks, one pair (or one round) at a time ------- */

/* Messages in flight in the bandwidth stream: enough to keep a link busy
 * across the gap between one completion and the next send, as osu_bw's
 * window does. */
#define STREAM_WINDOW 8
/* ... but no more than this many bytes in flight: a window of eight 8 MiB
 * messages takes half a second at 1 Gbit/s, and a sweep times every
 * direction of every pair several times; one 8 MiB message already keeps
 * the link busy for its whole transfer. */
#define STREAM_WINDOW_BYTES (2u << 20)

/* Messages in flight for messages of `n` bytes: STREAM_WINDOW, fewer for
 * large ones (STREAM_WINDOW_BYTES), at least one. */
static int window_for(size_t n)
{
    size_t fit = n ? STREAM_WINDOW_BYTES / n : STREAM_WINDOW;
    return fit < 1 ? 1 : fit > STREAM_WINDOW ? STREAM_WINDOW : (int)fit;
}
/* How long a waiting rank sleeps between tests of its request: short
 * against a pair's measurement (tens of ms), long enough to leave the CPU
 * to the measuring pair on a host whose ranks share cores. */
#define IDLE_SLEEP_NS 500000L
#define SWEEP_CMD_TAG 40
#define SWEEP_RESULT_TAG 41
#define SWEEP_REVERSE_TAG 42

struct pair {
    int round, a, b;      /* a < b */
};

/* One directed measurement as it travels between ranks (all doubles so one
 * MPI_DOUBLE message carries a pair's record). */
struct figures {
    double usec, usec_min, mad_pct, samples, reps;
};
#define FIGURES_DOUBLES 5

/* The time a rank spent waiting its turn, and the CPU it burnt meanwhile:
 * the test that waiting ranks sleep reads these. */
struct waiting {
    double wall, cpu;
};

static double process_cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
           (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
}

/* Complete `rq` without spinning: MPI_Wait, MPI_Recv and MPI_Barrier poll
 * the network at full speed in most MPIs, which on virtual nodes sharing
 * two cores would take the CPU from the pair being measured. */
static void wait_sleeping(MPI_Request *rq, void *status, struct waiting *w)
{
    double wall0 = MPI_Wtime(), cpu0 = process_cpu_seconds();
    struct timespec nap = {0, IDLE_SLEEP_NS};
    int done = 0;
    for (;;) {
        MPI_Test(rq, &done, status ? (MPI_Status *)status : MPI_STATUS_IGNORE);
        if (done)
            break;
        nanosleep(&nap, NULL);
    }
    w->wall += MPI_Wtime() - wall0;
    w->cpu += process_cpu_seconds() - cpu0;
}

static void recv_sleeping(void *buf, int count, MPI_Datatype type, int source, int tag,
                          struct waiting *w)
{
    MPI_Request rq;
    MPI_Irecv(buf, count, type, source, tag, MPI_COMM_WORLD, &rq);
    wait_sleeping(&rq, NULL, w);
}

/* Round-robin tournament by the circle method: rank m-1 stays put while the
 * others rotate, so every round pairs each rank at most once and after m-1
 * rounds every pair has met once.  An odd count adds a phantom rank; whoever
 * meets it sits the round out.  Mirrored by netbench.results.sweep.round_robin. */
static int round_robin(int n, struct pair *out)
{
    int m = n % 2 ? n + 1 : n, count = 0;
    for (int r = 0; r < m - 1; r++)
        for (int i = 0; i < m / 2; i++) {
            int x = i == 0 ? m - 1 : (r + i) % (m - 1);
            int y = i == 0 ? r : (r - i + (m - 1)) % (m - 1);
            if (x >= n || y >= n)
                continue;
            out[count++] = (struct pair){r, x < y ? x : y, x < y ? y : x};
        }
    return count;
}

/* Is a:b (either order) in the -L list "0:1,2:3"?  No list: every pair. */
static int pair_listed(const char *list, int a, int b)
{
    if (!list)
        return 1;
    for (const char *p = list; *p;) {
        char *end;
        long x = strtol(p, &end, 10), y = -1;
        if (*end == ':')
            y = strtol(end + 1, &end, 10);
        if ((x == a && y == b) || (x == b && y == a))
            return 1;
        p = *end == ',' ? end + 1 : end;
        if (*end && *end != ',')
            break;
    }
    return 0;
}

/* Every -L entry must name two different ranks of this job: a typo would
 * otherwise silently measure nothing. */
static void check_pair_list(const char *list, int nranks)
{
    if (!list)
        return;
    for (const char *p = list; *p;) {
        char *end;
        long x = strtol(p, &end, 10), y = -1;
        if (end == p || *end != ':')
            usage_error("-L: expected pairs as A:B,C:D, got '%s'", list);
        const char *second = end + 1;
        y = strtol(second, &end, 10);
        if (end == second || (*end && *end != ',') || x < 0 || y < 0 || x >= nranks ||
            y >= nranks || x == y)
            usage_error("-L: '%s' names no pair of two different ranks of this job", list);
        p = *end ? end + 1 : end;
    }
}

/* The scheduled pairs that the sweep measures, in order. */
static int sweep_schedule(struct bench *b, struct pair **out)
{
    int n = b->size, m = n % 2 ? n + 1 : n;
    struct pair *all = calloc((size_t)(m / 2) * (size_t)(m - 1) + 1, sizeof *all);
    int total = round_robin(n, all), kept = 0;
    for (int i = 0; i < total; i++)
        if (pair_listed(b->opt->pair_list, all[i].a, all[i].b))
            all[kept++] = all[i];
    *out = all;
    return kept;
}

/* One-way bandwidth: `reps` windows of window_for(n) messages from pair
 * rank 0 to pair rank 1, a whole window in flight at a time even when one
 * batch is all the budget allows; the receiver acknowledges the last, so
 * the sender's clock stops when the data has arrived.  All messages of a
 * window land in one receive buffer, as osu_bw's do: only timing counts. */
static double batch_stream_window(struct bench *b, size_t n, long reps)
{
    MPI_Request rq[STREAM_WINDOW];
    /* a status array, not MPI_STATUSES_IGNORE: GCC's -Wstringop-overflow
     * takes that for an empty array in Debian's MPICH 4.0 headers */
    MPI_Status st[STREAM_WINDOW];
    char ack = 0;
    int window = window_for(n);
    double t0 = MPI_Wtime();
    for (long w = 0; w < reps; w++) {
        for (int i = 0; i < window; i++) {
            if (b->rank == 0)
                MPI_Isend(b->sbuf, (int)n, MPI_BYTE, 1, 10, b->comm, &rq[i]);
            else
                MPI_Irecv(b->rbuf, (int)n, MPI_BYTE, 0, 10, b->comm, &rq[i]);
        }
        MPI_Waitall(window, rq, st);
    }
    if (b->rank == 0)
        MPI_Recv(&ack, 1, MPI_BYTE, 1, 11, b->comm, MPI_STATUS_IGNORE);
    else
        MPI_Send(&ack, 1, MPI_BYTE, 0, 11, b->comm);
    return MPI_Wtime() - t0;
}

/* Figures per message of a measurement whose iterations each carry
 * `messages` messages (a stream's window; 1 for the ping-pong). */
static struct figures figures_of(struct stats st, int messages)
{
    return (struct figures){st.median * 1e6 / messages, st.min * 1e6 / messages,
                            st.median > 0 ? 100 * st.mad / st.median : 0, st.samples,
                            (double)st.reps * messages};
}

/* A bench of the two ranks `first` and `second` (world ranks) alone, with
 * `first` as its rank 0: the sender of the stream, the timer of the
 * ping-pong. */
static struct bench pair_bench(struct bench *b, int first, int second)
{
    struct bench pb = *b;
    MPI_Group world, two;
    int members[2] = {first, second};
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_incl(world, 2, members, &two);
    MPI_Comm_create_group(MPI_COMM_WORLD, two, 0, &pb.comm);
    MPI_Group_free(&two);
    MPI_Group_free(&world);
    MPI_Comm_rank(pb.comm, &pb.rank);
    pb.size = 2;
    return pb;
}

/* Record of a pair: [0] latency, then per size [1+2i] a->b and [2+2i] b->a. */
static int record_length(int nsizes)
{
    return 1 + 2 * nsizes;
}

/* Both members of pair (a, b) run this; on return `record` is complete on a. */
static void measure_pair(struct bench *b, int a, int bb, struct figures *record)
{
    int nsizes;
    size_t *sizes = message_sizes(b->opt, &nsizes);
    struct bench ab = pair_bench(b, a, bb), ba = pair_bench(b, bb, a);
    struct figures *reverse = calloc((size_t)nsizes, sizeof *reverse);
    record[0] = figures_of(measure(&ab, batch_pingpong, b->opt->latency_bytes), 1);
    for (int i = 0; i < nsizes; i++) {
        record[1 + 2 * i] = figures_of(measure(&ab, batch_stream_window, sizes[i]),
                                       window_for(sizes[i]));
        reverse[i] = figures_of(measure(&ba, batch_stream_window, sizes[i]),
                                window_for(sizes[i]));
    }
    /* b timed the b->a streams: its figures join a's record */
    if (b->rank == bb)
        MPI_Send(reverse, nsizes * FIGURES_DOUBLES, MPI_DOUBLE, a, SWEEP_REVERSE_TAG,
                 MPI_COMM_WORLD);
    else
        MPI_Recv(reverse, nsizes * FIGURES_DOUBLES, MPI_DOUBLE, bb, SWEEP_REVERSE_TAG,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    for (int i = 0; i < nsizes; i++)
        record[2 + 2 * i] = reverse[i];
    free(reverse);
    MPI_Comm_free(&ab.comm);
    MPI_Comm_free(&ba.comm);
}

static void print_figures_row(int round, int src, int dst, size_t bytes, int latency,
                              struct figures f)
{
    double mbps = f.usec > 0 ? 8.0 * (double)bytes / f.usec : 0;  /* bits/us = 10^6 bit/s */
    printf("%5d %5d %5d %10zu %d %12.4f %12.4f %8.3f %12.3f %4.0f %9.0f\n", round, src, dst,
           bytes, latency, f.usec, f.usec_min, f.mad_pct, mbps, f.samples, f.reps);
}

/* The pair's rows: latency once (a timed it, src a < dst b), then the
 * bandwidth of each size in both directions, src sending. */
static void print_pair(struct bench *b, struct pair p, struct figures *record)
{
    int nsizes;
    size_t *sizes = message_sizes(b->opt, &nsizes);
    print_figures_row(p.round, p.a, p.b, b->opt->latency_bytes, 1, record[0]);
    for (int i = 0; i < nsizes; i++) {
        print_figures_row(p.round, p.a, p.b, sizes[i], 0, record[1 + 2 * i]);
        print_figures_row(p.round, p.b, p.a, sizes[i], 0, record[2 + 2 * i]);
    }
    fflush(stdout);
}

/* Rank 0 tells a pair's members to start: each gets its partner. */
static void send_go(struct pair p)
{
    int partner_of_a[2] = {p.b, p.round}, partner_of_b[2] = {p.a, p.round};
    if (p.a != 0)
        MPI_Send(partner_of_a, 2, MPI_INT, p.a, SWEEP_CMD_TAG, MPI_COMM_WORLD);
    if (p.b != 0)
        MPI_Send(partner_of_b, 2, MPI_INT, p.b, SWEEP_CMD_TAG, MPI_COMM_WORLD);
}

/* Rank 0's part in pairs [first, last) that run at the same time: start
 * them, measure its own pair if it has one, then wait (sleeping) for the
 * others' records and print every pair in schedule order. */
static void run_pairs(struct bench *b, struct pair *pairs, int first, int last,
                      struct waiting *w)
{
    int nsizes, len;
    message_sizes(b->opt, &nsizes);
    len = record_length(nsizes);
    struct figures *records = calloc((size_t)(last - first) * (size_t)len, sizeof *records);
    for (int i = first; i < last; i++)
        send_go(pairs[i]);
    for (int i = first; i < last; i++)
        if (pairs[i].a == 0)
            measure_pair(b, pairs[i].a, pairs[i].b, records + (size_t)(i - first) * len);
    for (int i = first; i < last; i++)
        if (pairs[i].a != 0)
            recv_sleeping(records + (size_t)(i - first) * len, len * FIGURES_DOUBLES, MPI_DOUBLE,
                          pairs[i].a, SWEEP_RESULT_TAG, w);
    for (int i = first; i < last; i++)
        print_pair(b, pairs[i], records + (size_t)(i - first) * len);
    free(records);
}

/* Rank 0 coordinates: pairs one at a time, or a round's pairs together. */
static int coordinate_sweep(struct bench *b, struct pair *pairs, int npairs, struct waiting *w)
{
    int rounds = 0;
    for (int i = 0; i < npairs;) {
        int end = i + 1;
        while (end < npairs && pairs[end].round == pairs[i].round)
            end++;
        rounds++;
        if (b->opt->concurrent)
            run_pairs(b, pairs, i, end, w);
        else
            for (int k = i; k < end; k++)
                run_pairs(b, pairs, k, k + 1, w);
        i = end;
    }
    int stop[2] = {-1, -1};
    for (int r = 1; r < b->size; r++)
        MPI_Send(stop, 2, MPI_INT, r, SWEEP_CMD_TAG, MPI_COMM_WORLD);
    return rounds;
}

/* Every other rank: sleep until rank 0 names a partner, measure the pair,
 * and report it if it is the pair's lower rank; until rank 0 says stop. */
static void follow_sweep(struct bench *b, struct waiting *w)
{
    int nsizes;
    message_sizes(b->opt, &nsizes);
    int len = record_length(nsizes);
    struct figures *record = calloc((size_t)len, sizeof *record);
    for (;;) {
        int cmd[2];
        recv_sleeping(cmd, 2, MPI_INT, 0, SWEEP_CMD_TAG, w);
        int partner = cmd[0];
        if (partner < 0)
            break;
        int a = b->rank < partner ? b->rank : partner, bb = b->rank < partner ? partner : b->rank;
        measure_pair(b, a, bb, record);
        if (b->rank == a)
            MPI_Send(record, len * FIGURES_DOUBLES, MPI_DOUBLE, 0, SWEEP_RESULT_TAG,
                     MPI_COMM_WORLD);
    }
    free(record);
}

/* `# rank R cpu_seconds C wall_seconds W wait_seconds S wait_cpu_seconds U`
 * per rank: what the sweep cost each rank, and that waiting cost little. */
static void print_cpu_use(struct bench *b, double wall, double cpu, struct waiting w)
{
    double mine[4] = {cpu, wall, w.wall, w.cpu};
    double *all = b->rank == 0 ? calloc((size_t)b->size * 4, sizeof(double)) : NULL;
    MPI_Gather(mine, 4, MPI_DOUBLE, all, 4, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (b->rank != 0)
        return;
    for (int r = 0; r < b->size; r++)
        printf("# rank %d cpu_seconds %.4f wall_seconds %.4f wait_seconds %.4f "
               "wait_cpu_seconds %.4f\n", r, all[4 * r], all[4 * r + 1], all[4 * r + 2],
               all[4 * r + 3]);
    free(all);
}

static int run_pair_sweep(struct bench *b)
{
    struct pair *pairs;
    int npairs = sweep_schedule(b, &pairs), rounds = 0;
    struct waiting w = {0, 0};
    double start = MPI_Wtime(), cpu0 = process_cpu_seconds();
    if (b->rank == 0) {
        printf("# sweep: latency_bytes=%zu window=%d window_bytes=%u order=%s pairs=%s\n",
               b->opt->latency_bytes, STREAM_WINDOW, STREAM_WINDOW_BYTES,
               b->opt->concurrent ? "concurrent" : "sequential",
               b->opt->pair_list ? b->opt->pair_list : "all");
        printf("# columns: round src dst bytes latency usec usec_min mad_pct Mbps samples "
               "reps\n");
        rounds = coordinate_sweep(b, pairs, npairs, &w);
    } else {
        follow_sweep(b, &w);
    }
    double elapsed = MPI_Wtime() - start;
    print_cpu_use(b, elapsed, process_cpu_seconds() - cpu0, w);
    if (b->rank == 0) {
        printf("@ rounds %d\n", rounds);
        printf("@ pairs %d\n", npairs);
        printf("@ sweep_seconds %.3f\n", elapsed);
        printf("@ order %s\n", b->opt->concurrent ? "concurrent" : "sequential");
    }
    free(pairs);
    return 0;
}

/* ---- the host's core-to-core round trip ---------------------------------- */

/* When ranks 0 and 1 share a host, a cache line bounced between them through
 * shared memory: the hardware's floor under every message between them.  On
 * a VM it moves with where the hypervisor puts the vCPUs; on the machine
 * netbench was developed on it switched between 112 and 507 ns minutes
 * apart, and Open MPI's shared-memory latency moved with it (0.10 and
 * 0.34 us at 8 bytes, 1.72 and 2.27 us at 4 KiB).  Measured before and after
 * the run and printed as `# host core_round_trip_ns NS cpus A B`, so a run
 * in a slower mode of the host is not taken for a slower path. */
#define ROUND_TRIP_BATCHES 7
#define ROUND_TRIPS 5000
#define ROUND_TRIP_BATCH_S 0.01     /* two ranks on one CPU take a time slice a trip */
#define STOP_BOUNCING (-1L)

/* rank 0 writes line[0], rank 1 answers in line[32]: 256 bytes apart, so
 * neither the line nor its prefetched neighbour is shared */
/* Whether ranks 0 and 1 run on one host (every rank calls it); rank 0
 * learns rank 1's CPU. */
static int same_host_pair(int *cpu1)
{
    char host[MPI_MAX_PROCESSOR_NAME] = {0}, other[MPI_MAX_PROCESSOR_NAME] = {0};
    int len, cpu = sched_getcpu(), same = 0;
    MPI_Get_processor_name(host, &len);
    if (world_rank == 1) {
        MPI_Send(host, sizeof host, MPI_CHAR, 0, 91, MPI_COMM_WORLD);
        MPI_Send(&cpu, 1, MPI_INT, 0, 91, MPI_COMM_WORLD);
    } else if (world_rank == 0) {
        MPI_Recv(other, sizeof other, MPI_CHAR, 1, 91, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Recv(cpu1, 1, MPI_INT, 1, 91, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        same = strcmp(host, other) == 0;
    }
    MPI_Bcast(&same, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return same;
}

/* Rank 0 creates the file (O_EXCL, 0600: no one else's file is used) and
 * removes it once rank 1 has it mapped; NULL on both ranks where either
 * cannot map it.  Between ranks 0 and 1 only. */
static volatile long *share_a_line(void)
{
    char path[64] = "";
    void *p = MAP_FAILED;
    int ok = 0;
    if (world_rank == 0) {
        strcpy(path, "/dev/shm/netbench-rt-XXXXXX");
        int fd = mkstemp(path);
        if (fd >= 0 && ftruncate(fd, 4096) == 0)
            p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (fd >= 0)
            close(fd);
        if (fd >= 0 && p == MAP_FAILED)
            unlink(path);
        if (p == MAP_FAILED)
            path[0] = 0;        /* rank 1 maps nothing */
        MPI_Send(path, sizeof path, MPI_CHAR, 1, 92, MPI_COMM_WORLD);
        MPI_Recv(&ok, 1, MPI_INT, 1, 92, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (path[0])
            unlink(path);
    } else {
        MPI_Recv(path, sizeof path, MPI_CHAR, 0, 92, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        int fd = path[0] ? open(path, O_RDWR | O_NOFOLLOW) : -1;
        if (fd >= 0) {
            p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            close(fd);
        }
        ok = p != MAP_FAILED;
        MPI_Send(&ok, 1, MPI_INT, 0, 92, MPI_COMM_WORLD);
    }
    if (!ok && p != MAP_FAILED)
        munmap(p, 4096);
    return ok ? p : NULL;
}

/* Rank 0's side: trips in batches, each batch ended by count or time. */
static double bounce_batches(volatile long *line)
{
    double per_trip[ROUND_TRIP_BATCHES];
    long value = 0;
    for (int k = 0; k < ROUND_TRIP_BATCHES; k++) {
        double start = MPI_Wtime(), now = start;
        long trips = 0;
        while (trips < ROUND_TRIPS && now - start < ROUND_TRIP_BATCH_S) {
            __atomic_store_n(&line[0], ++value, __ATOMIC_RELEASE);
            while (__atomic_load_n(&line[32], __ATOMIC_ACQUIRE) != value)
                ;
            ++trips;                /* the clock read at 1, 2, 4, ... and every 64 trips */
            if ((trips & (trips - 1)) == 0 || trips % 64 == 0)
                now = MPI_Wtime();
        }
        per_trip[k] = (MPI_Wtime() - start) / (double)trips * 1e9;
    }
    __atomic_store_n(&line[0], STOP_BOUNCING, __ATOMIC_RELEASE);
    return median_of(per_trip, ROUND_TRIP_BATCHES);
}

static void answer_bounces(volatile long *line)
{
    long seen = 0;
    for (;;) {
        long value;
        while ((value = __atomic_load_n(&line[0], __ATOMIC_ACQUIRE)) == seen)
            ;
        if (value == STOP_BOUNCING)
            return;
        __atomic_store_n(&line[32], value, __ATOMIC_RELEASE);
        seen = value;
    }
}

static void print_core_round_trip(struct bench *b)
{
    int cpu1 = -1;
    if (b->size < 2 || !same_host_pair(&cpu1) || world_rank > 1)
        return;
    volatile long *line = share_a_line();
    if (!line) {
        if (world_rank == 0)
            printf("# host core_round_trip_ns unavailable: no shared memory in /dev/shm\n");
        return;
    }
    if (world_rank == 0) {
        double ns = bounce_batches(line);
        printf("# host core_round_trip_ns %.1f cpus %d %d\n", ns, sched_getcpu(), cpu1);
    } else {
        answer_bounces(line);
    }
    munmap((void *)line, 4096);
}

/* ---- each node's conditions ------------------------------------------------ */

/* Every rank reads its node's CPU stall time (Linux's PSI,
 * /proc/pressure/cpu "some total=": microseconds some task waited for a CPU)
 * and its own time on a run queue (/proc/thread-self/schedstat's second
 * field, nanoseconds this thread was runnable but not running) when the run
 * starts and after it, and rank 0 prints one line per node:
 * `# node HOST cpu_pressure P ranks K cpus N rank_wait W`, P the share (%)
 * of the run's own time some task on the node waited, W the largest share
 * one of the node's ranks waited itself.  PSI's "some" is averaged over the
 * node's CPUs (one task waiting reads near 50 % on 2 CPUs, near 1/N on N),
 * so on a large node only the rank's own wait says that it lost its core;
 * and the kernel's avg10 would lag (a run of a few seconds moves a 10 s
 * average only part of the way: a run's first launch read it 20-30 points
 * low under a busy core).  A verdict compares
 * what every node of the job was doing with what its reference's runs saw,
 * not the first node alone.  -1: the kernel has no PSI. */
struct node_reading {
    char host[MPI_MAX_PROCESSOR_NAME];
    double pressure;
    double wait;
    long cpus;
};

struct stall_mark {
    double stalled_us;      /* PSI some total, or -1 */
    double waited_us;       /* this thread's run-queue wait, or -1 */
    double at_us;           /* CLOCK_MONOTONIC */
};

static struct stall_mark run_start;

static struct stall_mark stall_now(void)
{
    struct stall_mark m = {.stalled_us = -1, .waited_us = -1};
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    m.at_us = t.tv_sec * 1e6 + t.tv_nsec / 1e3;
    unsigned long long total;
    FILE *f = fopen("/proc/pressure/cpu", "r");
    if (f) {
        if (fscanf(f, "some avg10=%*f avg60=%*f avg300=%*f total=%llu", &total) == 1)
            m.stalled_us = (double)total;
        fclose(f);
    }
    f = fopen("/proc/thread-self/schedstat", "r");
    if (f) {
        if (fscanf(f, "%*s %llu", &total) == 1)
            m.waited_us = total / 1e3;
        fclose(f);
    }
    return m;
}

/* the share (%) of `elapsed` that a counter read `before` and `after` grew by */
static double share_of(double before, double after, double elapsed)
{
    if (before < 0 || after < 0 || elapsed <= 0)
        return -1;
    double share = 100.0 * (after - before) / elapsed;
    return share > 100.0 ? 100.0 : share;
}

static void print_node_conditions(struct bench *b)
{
    struct stall_mark end = stall_now();
    double elapsed = end.at_us - run_start.at_us;
    struct node_reading mine = {.pressure = share_of(run_start.stalled_us, end.stalled_us, elapsed),
                                .wait = share_of(run_start.waited_us, end.waited_us, elapsed),
                                .cpus = sysconf(_SC_NPROCESSORS_ONLN)};
    int len;
    MPI_Get_processor_name(mine.host, &len);
    struct node_reading *all = NULL;
    if (b->rank == 0)
        all = calloc((size_t)b->size, sizeof mine);
    MPI_Gather(&mine, sizeof mine, MPI_BYTE, all, sizeof mine, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (b->rank != 0)
        return;
    for (int r = 0; r < b->size; r++) {
        int first = 1, ranks = 0;
        for (int q = 0; q < b->size; q++)
            if (strcmp(all[q].host, all[r].host) == 0) {
                ranks++;
                if (q < r)
                    first = 0;
            }
        if (!first)
            continue;
        double highest = all[r].pressure, longest = all[r].wait;
        for (int q = 0; q < b->size; q++)
            if (strcmp(all[q].host, all[r].host) == 0) {
                if (all[q].pressure > highest)
                    highest = all[q].pressure;
                if (all[q].wait > longest)
                    longest = all[q].wait;
            }
        if (highest < 0)
            continue;
        printf("# node %s cpu_pressure %.2f ranks %d cpus %ld", all[r].host, highest,
               ranks, all[r].cpus);
        if (longest >= 0)
            printf(" rank_wait %.2f", longest);
        printf("\n");
    }
    free(all);
    fflush(stdout);
}

/* ---- main ---------------------------------------------------------------- */

static char *alloc_buffer(size_t n)
{
    void *p = NULL;
    if (posix_memalign(&p, 4096, n ? n : 1))
        die("%s", "out of memory");
    memset(p, 0, n ? n : 1);   /* touch every page before timing */
    return p;
}

int main(int argc, char **argv)
{
    struct options o;
    struct bench b = {.opt = &o, .comm = MPI_COMM_WORLD, .sock = -1};
    MPI_Init(&argc, &argv);
    run_start = stall_now();
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    b.rank = world_rank;
    MPI_Comm_size(MPI_COMM_WORLD, &b.size);
    setvbuf(stdout, NULL, _IOLBF, 0);
    parse_options(&o, argc, argv);
    if ((o.mode == PINGPONG || o.mode == TCP || o.mode == SWEEP) && b.size < 2)
        usage_error("%s", "pingpong, tcp and sweep need at least 2 processes");
    if (o.mode == SWEEP)
        check_pair_list(o.pair_list, b.size);
    int nsizes;
    size_t *sizes = message_sizes(&o, &nsizes);
    size_t largest = nsizes ? sizes[nsizes - 1] : 1;
    if (o.mode == SWEEP && o.latency_bytes > largest)
        largest = o.latency_bytes;
    b.sbuf = alloc_buffer(largest);
    b.rbuf = o.one_buffer ? b.sbuf : alloc_buffer(largest);
    busy_poll_reads = o.busy_poll;
    if (o.mode == EXCHANGE) {
        b.sbuf2 = alloc_buffer(largest);
        b.rbuf2 = alloc_buffer(largest);
    }
    print_header(&b);
    print_core_round_trip(&b);
    int rc = 0;
    switch (o.mode) {
    case PINGPONG: rc = run_sweep(&b, batch_pingpong, 0); break;
    case SENDRECV: rc = run_sweep(&b, batch_sendrecv, 0); break;
    case EXCHANGE: rc = run_sweep(&b, batch_exchange, 0); break;
    case BCAST: rc = run_sweep(&b, batch_bcast, 0); break;
    case SWEEP: rc = run_pair_sweep(&b); break;
    case TCP:
        if (o.stream) {
            tcp_connect_pair(&b, b.socks, o.connections, 0);
            rc = run_stream(&b);
            if (b.rank <= 1)
                for (int i = 0; i < o.connections; i++)
                    close(b.socks[i]);
        } else {
            tcp_connect_pair(&b, &b.sock, 1, 1);
            rc = run_sweep(&b, batch_tcp_pingpong, 1);
            if (b.rank <= 1)
                close(b.sock);
        }
        break;
    }
    /* The node gather first and the cache-line round trip last, just
     * before MPI_Finalize: with the gather last, Debian's MPICH 4.0.2 over
     * UCX tcp hung in MPI_Finalize in a third of the runs of 2 ranks on one
     * node (docs/explanation/platform-facts.md). */
    print_node_conditions(&b);
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    print_core_round_trip(&b);
    MPI_Finalize();
    return rc;
}
