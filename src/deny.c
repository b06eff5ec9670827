/* deny.c */
#include "autoconf.h"
