/* config.c */
#include "autoconf.h"
