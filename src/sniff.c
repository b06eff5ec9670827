/* sniff.c */
#include "autoconf.h"
