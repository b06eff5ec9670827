#ifndef SLUICE_DENY_H
#define SLUICE_DENY_H
#endif
