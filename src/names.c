/* names.c */
#include "autoconf.h"
