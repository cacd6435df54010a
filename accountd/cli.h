
/*
 * accountd's cli.c: the subcommands (blocking libpq).
 */

#ifndef _ACCOUNTD_CLI_H_INCLUDED_
#define _ACCOUNTD_CLI_H_INCLUDED_


#include "accountd.h"


int cli_main(int argc, char **argv);


#endif /* _ACCOUNTD_CLI_H_INCLUDED_ */
