/* httphead.c */
#include "autoconf.h"
