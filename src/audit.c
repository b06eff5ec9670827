/* audit.c */
#include "autoconf.h"
