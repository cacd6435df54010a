
/*
 * accountd's conf.c: the configuration file and its table.
 */

#ifndef _ACCOUNTD_CONF_H_INCLUDED_
#define _ACCOUNTD_CONF_H_INCLUDED_


#include "accountd.h"


typedef struct {
    char      *database_url;
    char      *admin_database_url;
    char      *listen;
    int        listen_mode;
    char      *listen_group;
    char      *allow_users;
    uid_t     *allow_uids;
    unsigned   nallow_uids;
    char      *key_secret_file;
    char      *key_snapshot;
    char      *pidfile;
    char      *logfile;
    int        verbose;
    int        batch_max;
    int        batch_delay;
    int        queue_max;
    char      *gateway_name;
    char      *metrics_listen;
    int        absent;      /* an optional file that does not exist */
} acd_conf_t;

extern acd_conf_t  acd_cf;
extern char       *acd_conf_file;
extern int         acd_verbose_args;

int conf_load(const char *path, acd_conf_t *cf, int optional);
int conf_reload(void (*changed)(const acd_conf_t *old));
void conf_free(acd_conf_t *cf);
void conf_log_unset(const char *name);
int conf_parse_addr(const char *s, struct sockaddr_storage *sa,
    socklen_t *len);


#endif /* _ACCOUNTD_CONF_H_INCLUDED_ */
