#ifndef SLUICE_RESOLVE_H
#define SLUICE_RESOLVE_H
#endif
