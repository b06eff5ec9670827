#include "autoconf.h"
