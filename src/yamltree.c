/* yamltree.c */
#include "autoconf.h"
