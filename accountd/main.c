
/*
 * accountd: arguments, daemon set-up, the order of an iteration of the
 * event loop, signals.
 *
 * Everything runs in one epoll loop (event.c) and nothing in it blocks:
 * sockets are non-blocking, libpq is used asynchronously, signals arrive
 * through a signalfd as ordinary events, and timers are the loop's
 * timeout.
 */


#define _GNU_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "accountd.h"
#include "cli.h"
#include "client.h"
#include "conf.h"
#include "db.h"
#include "dbconn.h"
#include "event.h"
#include "keys.h"
#include "keyset.h"
#include "listener.h"
#include "log.h"
#include "metrics.h"
#include "pq.h"
#include "queue.h"
#include "snapshot.h"


#define MAIN_SHUTDOWN_WAIT        2000
#define MAIN_START_TIMEOUT        5


static void usage(FILE *out, const char *prog);
static void main_daemon(int daemonize);
static void main_loop(void);
static void main_signal(acd_event_t *ev, uint32_t events);
static void main_shutdown(int now);
static int main_signals(void);
static int main_daemonize(void);
static void main_ready(void);
static void pidfile_check(void);
static int pidfile_running(pid_t pid);
static void pidfile_write(void);
static void pidfile_remove(void);


static int           main_ready_fd = -1;
static int64_t       main_shutdown_at;
static acd_event_t   main_signal_ev = { .fd = -1 };
static char         *main_pidfile;


int
main(int argc, char **argv)
{
    int    c, daemonize, optional;
    char  *conf, *path;

    /*
     * The daemon holds the HMAC secret and the CLI prints new keys: neither
     * may leave a core dump with them in it.
     */
    (void) prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);

    conf = NULL;
    daemonize = 0;

    while ((c = getopt(argc, argv, "+c:dvhV")) != -1) {

        switch (c) {

        case 'c':
            conf = optarg;
            break;

        case 'd':
            daemonize = 1;
            break;

        case 'v':
            acd_verbose_args++;
            break;

        case 'h':
            usage(stdout, argv[0]);
            return 0;

        case 'V':
            printf("accountd %s\n", ACCOUNTD_VERSION);
            return 0;

        default:
            usage(stderr, argv[0]);
            return 2;
        }
    }

    /* a command without a configuration named may do without the file */
    optional = 0;

    if (conf == NULL) {
        conf = getenv("LLMGW_ACCOUNTD_CONF");

        if (conf == NULL || conf[0] == '\0') {
            conf = ACCOUNTD_DEFAULT_CONF;
            optional = (optind < argc);
        }
    }

    /* absolute, so that SIGHUP finds it after a chdir("/") */
    path = realpath(conf, NULL);
    acd_conf_file = path ? path : conf;

    if (conf_load(acd_conf_file, &acd_cf, optional) != 0) {
        return 1;
    }

    acd_verbose = acd_cf.verbose + acd_verbose_args;

    if (optind < argc) {

        if (daemonize) {
            fprintf(stderr, "accountd: -d is for the daemon, not for "
                    "commands\n");
            return 2;
        }

        return cli_main(argc - optind, argv + optind);
    }

    main_daemon(daemonize);

    return 0;
}


/* the daemon: failures up to the loop are fatal */

static void
main_daemon(int daemonize)
{
    int      written;
    PGconn  *conn;

    if (daemonize && acd_cf.logfile[0] == '\0') {
        log_fatal("-d needs \"logfile\" in \"%s\": stderr goes nowhere",
                  acd_conf_file);
    }

    if (acd_cf.listen[0] == '\0') {
        log_fatal("\"listen\" is not set in \"%s\"", acd_conf_file);
    }

    if (log_open(acd_cf.logfile) != 0) {
        log_fatal("could not open logfile \"%s\": %s", acd_cf.logfile,
                  strerror(errno));
    }

    if (acd_cf.pidfile[0] != '\0') {
        pidfile_check();
    }

    if (daemonize && main_daemonize() != 0) {
        log_fatal("could not become a daemon: %s", strerror(errno));
    }

    if (acd_cf.pidfile[0] != '\0') {
        pidfile_write();
    }

    if (event_init() != 0) {
        log_fatal("epoll_create1() failed: %s", strerror(errno));
    }

    if (main_signals() != 0) {
        log_fatal("could not set up signals: %s", strerror(errno));
    }

    if (queue_init(acd_cf.queue_max) != 0) {
        log_fatal("out of memory for a queue of %d records",
                  acd_cf.queue_max);
    }

    if (db_init() != 0) {
        log_fatal("out of memory for batches of %d records",
                  acd_cf.batch_max);
    }

    /*
     * The snapshot is written before the socket exists, so that whoever
     * waits for the socket finds the keys.  If the database is down, the
     * old snapshot stays and the loop writes a new one once connected.
     */

    written = 0;

    if (acd_cf.key_snapshot[0] != '\0') {
        conn = pq_connect(acd_cf.database_url, MAIN_START_TIMEOUT);

        if (conn != NULL) {
            written = snapshot_blocking(conn, acd_cf.key_snapshot,
                                        keyset_publish)
                      == 0;
            PQfinish(conn);
        }

    } else {
        log_warning("\"key_snapshot\" is not set, no key snapshot written");
        written = 1;
    }

    if (metrics_init() != 0) {
        log_fatal("could not listen on \"%s\" (metrics_listen)",
                  acd_cf.metrics_listen);
    }

    if (listener_init() != 0) {
        log_fatal("could not listen on \"%s\"", acd_cf.listen);
    }

    db_start(written);

    log_info("accountd %s started, pid %d", ACCOUNTD_VERSION, (int) getpid());

    main_ready();

    main_loop();

    db_close();
    listener_close();
    metrics_close();
    keyset_done();
    event_done();
    pidfile_remove();

    log_info("accountd stopped");
    log_close();
}


static void
usage(FILE *out, const char *prog)
{
    fprintf(out,
        "usage: %s [-c FILE] [-d] [-v]...        run the daemon\n"
        "       %s [-c FILE] COMMAND ...         run a command and exit\n"
        "\n"
        "  -c FILE   configuration file (default $LLMGW_ACCOUNTD_CONF,\n"
        "            else " ACCOUNTD_DEFAULT_CONF ")\n"
        "  -d        run in the background (needs logfile)\n"
        "  -v        more verbose, up to three times\n"
        "  -V        print the version\n"
        "\n"
        "commands:\n"
        "  tenant create --name NAME --tier TIER [--daily-cap-usd AMOUNT]\n"
        "                [--monthly-cap-usd AMOUNT] [--time-zone TZ]\n"
        "  tenant update --name NAME [--tier TIER] [--rename NEW]\n"
        "                [--daily-cap-usd AMOUNT|none]\n"
        "                [--monthly-cap-usd AMOUNT|none] [--time-zone TZ]\n"
        "  tenant list\n"
        "  key create --tenant NAME [--tier TIER] [--models LIST]\n"
        "             [--expires-in DURATION] [--daily-cap-usd AMOUNT]\n"
        "             [--monthly-cap-usd AMOUNT] [--test]\n"
        "  key update ID|PREFIX [--daily-cap-usd AMOUNT|none]\n"
        "             [--monthly-cap-usd AMOUNT|none]\n"
        "  key list [--tenant NAME]\n"
        "  key revoke ID|PREFIX\n"
        "  key rotate ID|PREFIX --grace DURATION\n"
        "  snapshot\n"
        "  capacity --capacity TPM --plans TIER=TPM[,TIER=TPM...]\n"
        "           [--days N] [--sigma K]\n"
        "  period close [--tenant NAME [--month YYYY-MM]] [--grace DURATION]\n"
        "  invoice list [--tenant NAME]\n"
        "  invoice export INVOICE\n"
        "\n"
        "LIST is \"*\" or model names separated by commas; DURATION is a\n"
        "number and a unit, s, m, h or d (30s, 15m, 12h, 30d); PREFIX is a\n"
        "key's prefix as \"key list\" shows it; AMOUNT is dollars, such as\n"
        "12.50, at most 12 decimals.\n"
        "LLMGW_DATABASE_URL, if set, overrides database_url, and\n"
        "LLMGW_ADMIN_DATABASE_URL admin_database_url, the commands' role.\n",
        prog, prog);
}


static void
main_loop(void)
{
    int64_t  at, mat;

    for ( ;; ) {

        at = db_timer_at();
        mat = metrics_timer_at();

        if (mat && (at == 0 || mat < at)) {
            at = mat;
        }

        if (acd_shutting_down && (at == 0 || main_shutdown_at < at)) {
            at = main_shutdown_at;
        }

        switch (event_process(at)) {

        case -1:
            return;

        case 1:
            continue;
        }

        db_timer(event_now());
        metrics_timer(event_now());

        /*
         * The ACKs first: paused connections resume there and queue the
         * frames they kept, which the batch started next takes; started
         * before, they would wait for an event that may never come.
         */
        client_flush();
        db_kick();
        client_reap();

        if (!acd_shutting_down) {
            continue;
        }

        if (!db_flushable() && client_idle()) {
            if (queue_len()) {
                log_warning("%zu records not written: the database is "
                            "unreachable; their senders keep them",
                            queue_len());
            }

            return;
        }

        if (event_now() >= main_shutdown_at) {
            log_warning("gave up waiting, %zu records not written; their "
                        "senders keep them", queue_len());
            return;
        }
    }
}


static int
main_signals(void)
{
    sigset_t  set;

    signal(SIGPIPE, SIG_IGN);

    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);

    if (sigprocmask(SIG_BLOCK, &set, NULL) == -1) {
        return -1;
    }

    main_signal_ev.fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (main_signal_ev.fd == -1) {
        return -1;
    }

    main_signal_ev.handler = main_signal;

    return event_set(&main_signal_ev, EPOLLIN);
}


static void
main_signal(acd_event_t *ev, uint32_t events)
{
    struct signalfd_siginfo  si;

    while (read(ev->fd, &si, sizeof(si)) == sizeof(si)) {

        switch (si.ssi_signo) {

        case SIGTERM:
        case SIGINT:
            main_shutdown(acd_shutting_down);
            break;

        case SIGHUP:
            if (acd_shutting_down) {
                break;
            }

            log_info("SIGHUP received, reloading");

            if (conf_reload(dbconn_conf_changed) == 0) {
                listener_recheck();
                keys_request();
            }

            break;
        }
    }
}


/* the first signal drains the queue for a while, a second one exits */

static void
main_shutdown(int now)
{
    if (now) {
        log_info("second signal, exiting now");
        main_shutdown_at = event_now();
        return;
    }

    log_info("shutting down, %zu records queued", queue_len());

    acd_shutting_down = 1;
    main_shutdown_at = event_now() + MAIN_SHUTDOWN_WAIT;

    listener_close();
}


/*
 * The parent waits until the child is listening, so that "accountd -d"
 * fails visibly when the daemon cannot start.
 */

static int
main_daemonize(void)
{
    int      fd, pfd[2];
    char     c;
    pid_t    pid;
    ssize_t  n;

    if (pipe2(pfd, O_CLOEXEC) == -1) {
        return -1;
    }

    pid = fork();

    if (pid == -1) {
        return -1;
    }

    if (pid > 0) {
        close(pfd[1]);

        do {
            n = read(pfd[0], &c, 1);
        } while (n == -1 && errno == EINTR);

        if (n == 1 && c == 'r') {
            _exit(0);
        }

        fprintf(stderr, "accountd: the daemon did not start, see \"%s\"\n",
                acd_cf.logfile);
        _exit(1);
    }

    close(pfd[0]);
    main_ready_fd = pfd[1];

    if (setsid() == -1) {
        return -1;
    }

    pid = fork();

    if (pid == -1) {
        return -1;
    }

    if (pid > 0) {
        _exit(0);
    }

    if (chdir("/") == -1) {
        return -1;
    }

    fd = open("/dev/null", O_RDWR);
    if (fd == -1) {
        return -1;
    }

    dup2(fd, STDIN_FILENO);
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);

    if (fd > STDERR_FILENO) {
        close(fd);
    }

    return 0;
}


static void
main_ready(void)
{
    if (main_ready_fd != -1) {
        if (write(main_ready_fd, "r", 1) != 1) {
            log_warning("could not tell the parent that we started");
        }

        close(main_ready_fd);
        main_ready_fd = -1;
    }
}


static void
pidfile_check(void)
{
    int      fd;
    char     buf[32];
    long     pid;
    ssize_t  n;

    fd = open(acd_cf.pidfile, O_RDONLY | O_CLOEXEC);
    if (fd == -1) {
        return;
    }

    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);

    if (n <= 0) {
        return;
    }

    buf[n] = '\0';
    pid = strtol(buf, NULL, 10);

    if (pid > 0 && pid != getpid() && pidfile_running((pid_t) pid)) {
        log_fatal("pidfile \"%s\" names pid %ld, which is running",
              acd_cf.pidfile, pid);
    }

    log_info("removing stale pidfile \"%s\"", acd_cf.pidfile);
}


/*
 * After a crash the pid may be a zombie not yet reaped, or belong to
 * another program by now: only a live accountd counts.
 */

static int
pidfile_running(pid_t pid)
{
    int      fd;
    char     path[64], buf[512], *p;
    ssize_t  n;

    if (kill(pid, 0) == -1 && errno != EPERM) {
        return 0;
    }

    snprintf(path, sizeof(path), "/proc/%d/stat", (int) pid);

    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd == -1) {
        return 1;
    }

    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);

    if (n <= 0) {
        return 1;
    }

    buf[n] = '\0';

    /* "pid (comm) state ...", and comm may itself contain ") " */

    p = strrchr(buf, ')');

    if (p == NULL || p[1] != ' ' || p[2] == 'Z' || p[2] == 'X') {
        return 0;
    }

    return strncmp(buf + strcspn(buf, "(") + 1, "accountd", 8) == 0;
}


static void
pidfile_write(void)
{
    int   fd, n;
    char  buf[32];

    fd = open(acd_cf.pidfile, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
              0644);
    if (fd == -1) {
        log_fatal("could not create pidfile \"%s\": %s", acd_cf.pidfile,
              strerror(errno));
    }

    n = snprintf(buf, sizeof(buf), "%d\n", (int) getpid());

    if (write(fd, buf, n) != n) {
        close(fd);
        unlink(acd_cf.pidfile);
        log_fatal("could not write pidfile \"%s\": %s", acd_cf.pidfile,
              strerror(errno));
    }

    close(fd);

    main_pidfile = strdup(acd_cf.pidfile);

    /* a fatal error after this point must not leave it behind */
    atexit(pidfile_remove);
}


static void
pidfile_remove(void)
{
    if (main_pidfile != NULL) {
        unlink(main_pidfile);
        free(main_pidfile);
        main_pidfile = NULL;
    }
}
