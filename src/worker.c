/* worker.c */
#include "autoconf.h"
