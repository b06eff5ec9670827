/* resolve.c */
#include "autoconf.h"
