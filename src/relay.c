/* relay.c */
#include "autoconf.h"
