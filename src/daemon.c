/* daemon.c */
#include "autoconf.h"
