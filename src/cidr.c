/* cidr.c */
#include "autoconf.h"
