/* ca_int.h: a CA's insides, for ca.c and ca_remote.c alone. */
#ifndef SLUICE_CA_INT_H
#define SLUICE_CA_INT_H

#include <stddef.h>
#include <stdint.h>

#include <openssl/evp.h>
#include <openssl/x509.h>

struct ca {
	X509		*cert;
	unsigned char	*key_der;	/* sodium_malloc'd, noaccess at rest; NULL when remote */
	size_t		 key_len;
	uint64_t	 remote;	/* the keys process's handle; 0: the key is here */
};

/* ca_remote.c: the same calls, answered by the keys process. */
int	ca_remote_new(const char *sandbox_id, const char *const *names,
	    size_t nnames, unsigned validity_s, struct ca **out);
void	ca_remote_drop(struct ca *ca);
int	ca_remote_mint(struct ca *ca, const char *host, EVP_PKEY *leaf_key,
	    unsigned validity_s, X509 **out);

#endif
