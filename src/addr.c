/* addr.c */
#include "autoconf.h"
