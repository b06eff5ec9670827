/* conn.c */
#include "autoconf.h"
