
/*
 * The Unix socket the nginx workers connect to: its set-up (mode, group,
 * a stale socket removed), the peer's user checked on every connection
 * and again on SIGHUP, and the connections accepted handed to client.c.
 * Whoever is to act on a new connection (a fresh key set is built for
 * it) is called through listener_connected, set at init.
 */


#define _GNU_SOURCE

#include <errno.h>
#include <grp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "accountd.h"
#include "client.h"
#include "conf.h"
#include "event.h"
#include "listener.h"
#include "log.h"
#include "stats.h"


static void listener_accept(acd_event_t *ev, uint32_t events);
static void listener_room(void);
static int listener_group(gid_t *gid);
static int listener_peer_allowed(int fd, uint64_t id, pid_t *pid,
    uid_t *uid);
static int listener_uid_allowed(uid_t uid);


void  (*listener_connected)(void);

static acd_event_t    listener_ev = { .fd = -1 };
static char          *listener_path;
static int            listener_full;
static uint64_t       listener_next_id = 1;


int
listener_init(void)
{
    int                 fd;
    gid_t               gid;
    mode_t              old;
    struct stat         st;
    struct sockaddr_un  sa;

    if (acd_cf.listen[0] == '\0') {
        log_error("\"listen\" is not set");
        return -1;
    }

    if (listener_group(&gid) != 0) {
        return -1;
    }

    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;

    if (strlen(acd_cf.listen) >= sizeof(sa.sun_path)) {
        log_error("socket path \"%s\" is too long", acd_cf.listen);
        return -1;
    }

    strcpy(sa.sun_path, acd_cf.listen);

    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd == -1) {
        log_error("socket() failed: %s", strerror(errno));
        return -1;
    }

    /*
     * A socket left by a crash is removed; one that still answers belongs
     * to a running accountd and is left alone.
     */

    if (lstat(acd_cf.listen, &st) == 0) {

        if (!S_ISSOCK(st.st_mode)) {
            log_error("\"%s\" exists and is not a socket", acd_cf.listen);
            goto failed;
        }

        if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) == 0
            || errno == EAGAIN || errno == EINPROGRESS)
        {
            log_error("another process is listening on \"%s\"",
                      acd_cf.listen);
            goto failed;
        }

        close(fd);

        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd == -1) {
            log_error("socket() failed: %s", strerror(errno));
            return -1;
        }

        if (unlink(acd_cf.listen) == -1 && errno != ENOENT) {
            log_error("could not remove stale socket \"%s\": %s",
                      acd_cf.listen, strerror(errno));
            goto failed;
        }

        log_info("removed stale socket \"%s\"", acd_cf.listen);
    }

    /* no moment with looser permissions than asked for */
    old = umask(~acd_cf.listen_mode & 0777);

    if (bind(fd, (struct sockaddr *) &sa, sizeof(sa)) == -1) {
        umask(old);
        log_error("bind() to \"%s\" failed: %s", acd_cf.listen,
                  strerror(errno));
        goto failed;
    }

    umask(old);

    /* the group, then the mode, both before listen() */
    if (gid != (gid_t) -1 && chown(acd_cf.listen, (uid_t) -1, gid) == -1) {
        log_error("chown() of \"%s\" to group \"%s\" failed: %s",
                  acd_cf.listen, acd_cf.listen_group, strerror(errno));
        unlink(acd_cf.listen);
        goto failed;
    }

    if (chmod(acd_cf.listen, acd_cf.listen_mode) == -1) {
        log_error("chmod() of \"%s\" failed: %s", acd_cf.listen,
                  strerror(errno));
        unlink(acd_cf.listen);
        goto failed;
    }

    if (listen(fd, 511) == -1) {
        log_error("listen() on \"%s\" failed: %s", acd_cf.listen,
                  strerror(errno));
        unlink(acd_cf.listen);
        goto failed;
    }

    listener_path = strdup(acd_cf.listen);
    if (listener_path == NULL) {
        unlink(acd_cf.listen);
        goto failed;
    }

    listener_ev.fd = fd;
    listener_ev.handler = listener_accept;
    client_closed = listener_room;

    if (event_set(&listener_ev, EPOLLIN) != 0) {
        unlink(acd_cf.listen);
        goto failed;
    }

    log_info("listening on \"%s\", mode %04o%s%s", acd_cf.listen,
             (unsigned) acd_cf.listen_mode,
             gid != (gid_t) -1 ? ", group " : "",
             gid != (gid_t) -1 ? acd_cf.listen_group : "");

    return 0;

failed:

    close(fd);

    return -1;
}


/* shutdown: no new connections and no new records; ACKs still go out */

void
listener_close(void)
{
    if (listener_ev.fd != -1) {
        event_del(&listener_ev);
        close(listener_ev.fd);
        listener_ev.fd = -1;
    }

    if (listener_path != NULL) {
        if (unlink(listener_path) == -1 && errno != ENOENT) {
            log_warning("could not remove \"%s\": %s", listener_path,
                        strerror(errno));
        }

        free(listener_path);
        listener_path = NULL;
    }

    client_shutdown();
}


static void
listener_accept(acd_event_t *ev, uint32_t events)
{
    int        fd;
    uid_t      uid;
    pid_t      pid;
    uint64_t   id;

    for ( ;; ) {
        fd = accept4(ev->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

        if (fd == -1) {
            if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED) {
                return;
            }

            if (errno == EMFILE || errno == ENFILE) {

                /* until a connection closes, or epoll would spin */
                log_error("accept() failed: %s, not accepting until a "
                          "client leaves", strerror(errno));
                listener_full = 1;
                event_set(ev, 0);
                return;
            }

            log_error("accept() failed: %s", strerror(errno));
            return;
        }

        id = listener_next_id++;

        /* before a byte is read or the key set is sent */
        if (!listener_peer_allowed(fd, id, &pid, &uid)) {
            acd_stats.peers_refused++;
            close(fd);
            continue;
        }

        if (client_new(fd, id, pid, uid) != 0) {
            return;
        }

        /* a fresh set soon, to everyone */
        if (listener_connected != NULL) {
            listener_connected();
        }

        log_debug("client #%llu connected (pid %d)",
                  (unsigned long long) id, (int) pid);
    }
}


/* a connection closed: accepting again if the descriptors ran out */

static void
listener_room(void)
{
    if (listener_full && listener_ev.fd != -1) {
        listener_full = 0;
        event_set(&listener_ev, EPOLLIN);
    }
}


/* listen_group: (gid_t) -1 if "", the group of the process keeps it */

static int
listener_group(gid_t *gid)
{
    char           *end;
    unsigned long   n;
    struct group   *gr;

    *gid = (gid_t) -1;

    if (acd_cf.listen_group[0] == '\0') {
        return 0;
    }

    if (acd_cf.listen_group[0] >= '0' && acd_cf.listen_group[0] <= '9') {
        errno = 0;
        n = strtoul(acd_cf.listen_group, &end, 10);

        if (*end == '\0' && errno == 0 && n < (gid_t) -1) {
            *gid = (gid_t) n;
            return 0;
        }

        log_error("invalid \"listen_group\" \"%s\"", acd_cf.listen_group);
        return -1;
    }

    gr = getgrnam(acd_cf.listen_group);

    if (gr == NULL) {
        log_error("unknown group \"%s\" in \"listen_group\"",
                  acd_cf.listen_group);
        return -1;
    }

    *gid = gr->gr_gid;

    return 0;
}


/*
 * The socket's mode keeps strangers out; the peer's user is checked as
 * well, so that a socket made looser by hand, or a group with other
 * members, does not let in who is not named: accountd's own user, and
 * allow_users.
 */

static int
listener_peer_allowed(int fd, uint64_t id, pid_t *pid, uid_t *uid)
{
    socklen_t     len;
    struct ucred  cred;

    len = sizeof(cred);

    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == -1) {
        log_warning("client #%llu refused: getsockopt(SO_PEERCRED) "
                    "failed: %s", (unsigned long long) id,
                    strerror(errno));
        return 0;
    }

    *pid = cred.pid;
    *uid = cred.uid;

    if (listener_uid_allowed(cred.uid)) {
        return 1;
    }

    log_warning("client #%llu refused: uid %u (pid %d) is not in "
                "\"allow_users\"", (unsigned long long) id,
                (unsigned) cred.uid, (int) cred.pid);

    return 0;
}


static int
listener_uid_allowed(uid_t uid)
{
    unsigned  i;

    if (uid == geteuid()) {
        return 1;
    }

    for (i = 0; i < acd_cf.nallow_uids; i++) {
        if (uid == acd_cf.allow_uids[i]) {
            return 1;
        }
    }

    return 0;
}


/* allow_users read again (SIGHUP) */

void
listener_recheck(void)
{
    client_recheck(listener_uid_allowed);
}
