/** The signed-in caller, loaded once by the console's shell and read by any page below it. */
import { createContext } from 'preact';
import { useContext } from 'preact/hooks';

export interface Me {
  id: string;
  email: string | null;
  phone: string | null;
  is_admin: boolean;
  /** false: an account made by a provider sign-in, which sets its first password without a current one. */
  has_password: boolean;
  two_factor_enabled: boolean;
  email_verified: boolean;
  created_at: string;
}

export const MeContext = createContext<Me | null>(null);
export const useMe = () => useContext(MeContext)!;
