/* policy.c */
#include "autoconf.h"
