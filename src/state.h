#ifndef SLUICE_STATE_H
#define SLUICE_STATE_H
#endif
