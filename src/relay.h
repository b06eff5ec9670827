#ifndef SLUICE_RELAY_H
#define SLUICE_RELAY_H
#endif
