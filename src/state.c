/* state.c */
#include "autoconf.h"
